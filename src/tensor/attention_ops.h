// The inner loops of attention, one KV block at a time: the query heads that share a KV head (GQA group,
// or one head for MHA) against that head's cached keys and values. A block holds `count` positions whose
// key (or value) rows are `head_dim` elements each, back to back: keys, values [count][head_dim], stored
// as f32, f16, bf16, or int8 / int4 with their scales (core/kv_rows.h), read in place: quantized
// elements are dequantized in registers, never into a copy of the block. Queries, scores, products and
// sums are fp32.
// Isa::kScalar is the reference (tensor/kv_quant.h's kv_element for every load); SIMD paths agree with
// it to about 1e-6 relative (sums are reordered; quantized blocks fold the scales into the query or the
// probabilities). Quantized rows whose width is not a multiple of 32 are read by the reference on every isa.
#pragma once

#include <cstddef>

#include "core/kv_dtype.h"
#include "core/kv_rows.h"
#include "tensor/isa.h"

namespace kvs {

// scores[h * stride + s] = scale * (q[h] . keys[s])  for h < nq, s < count; q: [nq][head_dim].
void attention_block_scores(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                            float* scores, size_t stride, Isa isa = best_isa());
inline void attention_block_scores(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim,
                                   float scale, float* scores, size_t stride, Isa isa = best_isa()) {
  attention_block_scores(q, nq, KvRows{keys, KvDType::kF32}, count, head_dim, scale, scores, stride, isa);
}

// out[h] += sum over s of probs[h * stride + s] * values[s]  for h < nq; out: [nq][head_dim].
// The sum runs over s in order, one fused multiply-add per element, so blocks of any size give the same bits.
void attention_block_values(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t head_dim,
                            float* out, Isa isa = best_isa());
inline void attention_block_values(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                                   size_t head_dim, float* out, Isa isa = best_isa()) {
  attention_block_values(probs, stride, nq, KvRows{values, KvDType::kF32}, count, head_dim, out, isa);
}

// dst[0..n) = src[0..n) as elements of `type`: a copy for f32, round to nearest even for f16 and bf16.
// Every isa writes the bits of fp32_to_fp16 / fp32_to_bf16 (core/half.h) for every value but NaN,
// which stays a NaN (its payload may differ). How K and V rows enter the cache.
void store_kv_row(KvDType type, const float* src, void* dst, size_t n, Isa isa = best_isa());

}  // namespace kvs
