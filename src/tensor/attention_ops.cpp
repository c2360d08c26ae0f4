#include "tensor/attention_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "core/status.h"
#include "tensor/attention_ops_internal.h"

namespace kvs {
namespace {

// Element i of a row of `type`, as fp32 (the scalar reference's load).
float element(KvRows rows, size_t i) {
  switch (rows.type) {
    case KvDType::kF16: return fp16_to_fp32(static_cast<const uint16_t*>(rows.data)[i]);
    case KvDType::kBF16: return bf16_to_fp32(static_cast<const uint16_t*>(rows.data)[i]);
    default: return static_cast<const float*>(rows.data)[i];
  }
}

void check_type(KvDType type) {
  KVS_ASSERT(!kv_dtype_quantized(type), "attention: these kernels read f32, f16 or bf16 K/V elements, not {}",
             kv_dtype_name(type));
}

}  // namespace

void attention_block_scores(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                            float* scores, size_t stride, Isa isa) {
  check_type(keys.type);
  switch (isa) {
    case Isa::kAvx512:
      return detail::attention_block_scores_avx512(q, nq, keys, count, head_dim, scale, scores, stride);
    case Isa::kAvx2: return detail::attention_block_scores_avx2(q, nq, keys, count, head_dim, scale, scores, stride);
    case Isa::kScalar: break;
  }
  for (size_t h = 0; h < nq; ++h) {
    for (size_t s = 0; s < count; ++s) {
      float acc = 0.0f;
      for (size_t i = 0; i < head_dim; ++i) acc += q[h * head_dim + i] * element(keys, s * head_dim + i);
      scores[h * stride + s] = scale * acc;
    }
  }
}

void attention_block_values(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t head_dim,
                            float* out, Isa isa) {
  check_type(values.type);
  switch (isa) {
    case Isa::kAvx512: return detail::attention_block_values_avx512(probs, stride, nq, values, count, head_dim, out);
    case Isa::kAvx2: return detail::attention_block_values_avx2(probs, stride, nq, values, count, head_dim, out);
    case Isa::kScalar: break;
  }
  for (size_t h = 0; h < nq; ++h) {
    for (size_t s = 0; s < count; ++s) {
      const float p = probs[h * stride + s];
      for (size_t i = 0; i < head_dim; ++i)
        out[h * head_dim + i] = std::fma(p, element(values, s * head_dim + i), out[h * head_dim + i]);
    }
  }
}

void store_kv_row(KvDType type, const float* src, void* dst, size_t n, Isa isa) {
  check_type(type);
  if (type == KvDType::kF32) {  // a copy on every isa; the kernels below round to 16 bits
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  switch (isa) {
    case Isa::kAvx512: return detail::store_kv_row_avx512(type, src, dst, n);
    case Isa::kAvx2: return detail::store_kv_row_avx2(type, src, dst, n);
    case Isa::kScalar: break;
  }
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = type == KvDType::kF16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
}

}  // namespace kvs
