// Per-ISA versions of the attention block kernels behind attention_ops.cpp's dispatch.
#pragma once

#include <cstddef>

#include "tensor/attention_ops.h"

namespace kvs::detail {

// The fused int8/int4 kernels (attention_quant_impl.h) take rows of whole 32-element chunks up to these widths:
// keys per channel fold the query into int16 steps bounded so that kQuantMaxWidth products fit int32 (head dims go
// to 256); rows grouped per token sum in fp32, and only their stack buffers bound the width (an MLA latent: 576).
inline constexpr size_t kQuantMaxWidth = 512;
inline constexpr size_t kQuantMaxTokenWidth = 1024;

// fn.template operator()<T>() for the floating KV element type `type`: how each ISA's entry points pick
// their kernel instantiation. Quantized types never get here (attention_ops.cpp refuses them first).
template <class Fn>
inline void with_kv_element_type(KvDType type, Fn&& fn) {
  switch (type) {
    case KvDType::kF32: return fn.template operator()<KvDType::kF32>();
    case KvDType::kF16: return fn.template operator()<KvDType::kF16>();
    case KvDType::kBF16: return fn.template operator()<KvDType::kBF16>();
    case KvDType::kInt8:
    case KvDType::kInt4: return;
  }
}

void attention_block_scores_avx2(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                                 float* scores, size_t stride);
void attention_block_values_avx2(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                                 size_t head_dim, float* out);
void store_kv_row_avx2(KvDType type, const float* src, void* dst, size_t n);  // type: kF16 or kBF16

// The fused int8 / int4 kernels (attention_quant_impl.h): rows a multiple of 32 elements.
void quant_block_scores_avx2(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                             float* scores, size_t stride);
void quant_block_values_avx2(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t head_dim,
                             float* out);
void quant_block_scores_avx512(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                               float* scores, size_t stride);
void quant_block_values_avx512(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                               size_t head_dim, float* out);

void attention_block_scores_avx512(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                                   float* scores, size_t stride);
void attention_block_values_avx512(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                                   size_t head_dim, float* out);
void store_kv_row_avx512(KvDType type, const float* src, void* dst, size_t n);  // type: kF16 or kBF16

}  // namespace kvs::detail
