#include "tensor/attention_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "core/status.h"
#include "tensor/attention_ops_internal.h"
#include "tensor/kv_quant.h"

namespace kvs {
namespace {

void check_floating(KvDType type) {
  KVS_ASSERT(!kv_dtype_quantized(type), "store_kv_row stores f32, f16 or bf16 elements, not {} (kv_quant.h does)",
             kv_dtype_name(type));
}

// The SIMD kernels of quantized blocks take rows cut into 32-element chunks (per-token groups of 32).
bool simd_reads_quantized(KvRows rows, size_t width) {
  if (width % kKvInt4Chunk != 0) return false;
  if (rows.axis == KvScaleAxis::kPerChannel) return width <= detail::kQuantMaxWidth;
  return rows.group_size == kKvInt4Chunk && width <= detail::kQuantMaxTokenWidth;
}

}  // namespace

void attention_block_scores(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                            float* scores, size_t stride, Isa isa) {
  if (kv_dtype_quantized(keys.type) && !simd_reads_quantized(keys, head_dim)) isa = Isa::kScalar;
  if (kv_dtype_quantized(keys.type) && isa != Isa::kScalar) {
    return isa == Isa::kAvx512 ? detail::quant_block_scores_avx512(q, nq, keys, count, head_dim, scale, scores, stride)
                               : detail::quant_block_scores_avx2(q, nq, keys, count, head_dim, scale, scores, stride);
  }
  switch (isa) {
    case Isa::kAvx512:
      return detail::attention_block_scores_avx512(q, nq, keys, count, head_dim, scale, scores, stride);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::attention_block_scores_avx2(q, nq, keys, count, head_dim, scale, scores, stride);
    case Isa::kScalar: break;
  }
  for (size_t h = 0; h < nq; ++h) {
    for (size_t s = 0; s < count; ++s) {
      float acc = 0.0f;
      for (size_t i = 0; i < head_dim; ++i) acc += q[h * head_dim + i] * kv_element(keys, head_dim, s, i);
      scores[h * stride + s] = scale * acc;
    }
  }
}

void attention_block_values(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t head_dim,
                            float* out, Isa isa) {
  if (kv_dtype_quantized(values.type) && !simd_reads_quantized(values, head_dim)) isa = Isa::kScalar;
  if (kv_dtype_quantized(values.type) && isa != Isa::kScalar) {
    return isa == Isa::kAvx512 ? detail::quant_block_values_avx512(probs, stride, nq, values, count, head_dim, out)
                               : detail::quant_block_values_avx2(probs, stride, nq, values, count, head_dim, out);
  }
  switch (isa) {
    case Isa::kAvx512: return detail::attention_block_values_avx512(probs, stride, nq, values, count, head_dim, out);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::attention_block_values_avx2(probs, stride, nq, values, count, head_dim, out);
    case Isa::kScalar: break;
  }
  for (size_t h = 0; h < nq; ++h) {
    for (size_t s = 0; s < count; ++s) {
      const float p = probs[h * stride + s];
      for (size_t i = 0; i < head_dim; ++i)
        out[h * head_dim + i] = std::fma(p, kv_element(values, head_dim, s, i), out[h * head_dim + i]);
    }
  }
}

void store_kv_row(KvDType type, const float* src, void* dst, size_t n, Isa isa) {
  check_floating(type);
  if (type == KvDType::kF32) {  // a copy on every isa; the kernels below round to 16 bits
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  switch (isa) {
    case Isa::kAvx512: return detail::store_kv_row_avx512(type, src, dst, n);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::store_kv_row_avx2(type, src, dst, n);
    case Isa::kScalar: break;
  }
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = type == KvDType::kF16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
}

}  // namespace kvs
