// Per-ISA versions of the attention block kernels behind attention_ops.cpp's dispatch.
#pragma once

#include <cstddef>

#include "tensor/attention_ops.h"

namespace kvs::detail {

void attention_block_scores_avx2(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                                 float* scores, size_t stride);
void attention_block_values_avx2(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                                 size_t head_dim, float* out);
void store_kv_row_avx2(DType type, const float* src, void* dst, size_t n);

void attention_block_scores_avx512(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                                   float* scores, size_t stride);
void attention_block_values_avx512(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                                   size_t head_dim, float* out);
void store_kv_row_avx512(DType type, const float* src, void* dst, size_t n);

}  // namespace kvs::detail
