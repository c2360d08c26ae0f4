#include "tensor/attention_ops.h"

#include <cmath>

#include "tensor/attention_ops_internal.h"

namespace kvs {

void attention_block_scores(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim, float scale,
                            float* scores, size_t stride, Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return detail::attention_block_scores_avx512(q, nq, keys, count, head_dim, scale, scores, stride);
    case Isa::kAvx2: return detail::attention_block_scores_avx2(q, nq, keys, count, head_dim, scale, scores, stride);
    case Isa::kScalar: break;
  }
  for (size_t h = 0; h < nq; ++h) {
    for (size_t s = 0; s < count; ++s) {
      float acc = 0.0f;
      for (size_t i = 0; i < head_dim; ++i) acc += q[h * head_dim + i] * keys[s * head_dim + i];
      scores[h * stride + s] = scale * acc;
    }
  }
}

void attention_block_values(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                            size_t head_dim, float* out, Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return detail::attention_block_values_avx512(probs, stride, nq, values, count, head_dim, out);
    case Isa::kAvx2: return detail::attention_block_values_avx2(probs, stride, nq, values, count, head_dim, out);
    case Isa::kScalar: break;
  }
  for (size_t h = 0; h < nq; ++h) {
    for (size_t s = 0; s < count; ++s) {
      const float p = probs[h * stride + s];
      for (size_t i = 0; i < head_dim; ++i)
        out[h * head_dim + i] = std::fma(p, values[s * head_dim + i], out[h * head_dim + i]);
    }
  }
}

}  // namespace kvs
