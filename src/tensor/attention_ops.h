// The inner loops of attention, one KV block at a time: the query heads that share a KV head (GQA group,
// or one head for MHA) against that head's cached keys and values. A block holds `count` positions whose
// key and value rows are `head_dim` floats each, back to back: keys, values [count][head_dim].
// Isa::kScalar is the reference; SIMD paths agree with it to about 1e-6 relative (sums are reordered).
#pragma once

#include <cstddef>

#include "tensor/isa.h"

namespace kvs {

// scores[h * stride + s] = scale * (q[h] . keys[s])  for h < nq, s < count; q: [nq][head_dim].
void attention_block_scores(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim, float scale,
                            float* scores, size_t stride, Isa isa = best_isa());

// out[h] += sum over s of probs[h * stride + s] * values[s]  for h < nq; out: [nq][head_dim].
// The sum runs over s in order, one fused multiply-add per element, so blocks of any size give the same bits.
void attention_block_values(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                            size_t head_dim, float* out, Isa isa = best_isa());

}  // namespace kvs
