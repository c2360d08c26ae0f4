// AVX-512 attention block kernels. Scores: four key rows at a time against four query heads (or one), each
// head's four sums reduced together (hsum4); values: a 64-float slice of four heads' (or one head's) output
// stays in registers while the block's value rows stream by. Ragged head dims use masked loads and stores. Each kernel
// is written once over the element type; f16 rows widen with vcvtph2ps, bf16 rows with a 16-bit shift, both exact.
#include "tensor/attention_ops_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

namespace {

// Lanes of the 16-float vector at offset i that lie inside [0, n).
KVS_ALWAYS_INLINE __mmask16 lanes(size_t i, size_t n) {
  return i >= n ? __mmask16(0) : n - i >= 16 ? __mmask16(0xffff) : tail_mask16(n - i);
}

// Elements [i, i + 16) of a row of T, masked, as fp32.
template <KvDType T>
KVS_ALWAYS_INLINE __m512 load16(const void* row, size_t i, __mmask16 m) {
  if constexpr (T == KvDType::kF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + i);
    if constexpr (T == KvDType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Rows [s, count) of one query head against the block's keys: four rows at a time, then one.
template <KvDType T>
KVS_ALWAYS_INLINE void head_scores(const float* qh, const void* keys, size_t s, size_t count, size_t head_dim,
                                   float scale, float* out) {
  for (; s + 4 <= count; s += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (size_t i = 0; i < head_dim; i += 16) {
      const __mmask16 m = lanes(i, head_dim);
      const __m512 qv = _mm512_maskz_loadu_ps(m, qh + i);
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(qv, load16<T>(keys, (s + r) * head_dim + i, m), acc[r]);
    }
    _mm_storeu_ps(out + s, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
  }
  for (; s < count; ++s) {
    __m512 acc = _mm512_setzero_ps();
    for (size_t i = 0; i < head_dim; i += 16) {
      const __mmask16 m = lanes(i, head_dim);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qh + i), load16<T>(keys, s * head_dim + i, m), acc);
    }
    out[s] = hsum1(acc) * scale;
  }
}

// Query heads that share the keys (a GQA/MQA group; an MLA latent's 16) go four at a time over four rows at a time:
// each key vector is loaded and widened once for the four heads. Every (head, row) sum runs over the same elements
// in the same order as head_scores, so the bits do not depend on the tiling.
template <KvDType T>
void scores_kernel(const float* q, size_t nq, const void* keys, size_t count, size_t head_dim, float scale,
                   float* scores, size_t stride) {
  constexpr size_t kHeads = 4;
  size_t h = 0;
  for (; h + kHeads <= nq; h += kHeads) {
    size_t s = 0;
    for (; s + 4 <= count; s += 4) {
      __m512 acc[kHeads][4];
#pragma GCC unroll 4
      for (size_t g = 0; g < kHeads; ++g)
        for (size_t r = 0; r < 4; ++r) acc[g][r] = _mm512_setzero_ps();
      for (size_t i = 0; i < head_dim; i += 16) {
        const __mmask16 m = lanes(i, head_dim);
        __m512 k[4];
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r) k[r] = load16<T>(keys, (s + r) * head_dim + i, m);
#pragma GCC unroll 4
        for (size_t g = 0; g < kHeads; ++g) {
          const __m512 qv = _mm512_maskz_loadu_ps(m, q + (h + g) * head_dim + i);
#pragma GCC unroll 4
          for (size_t r = 0; r < 4; ++r) acc[g][r] = _mm512_fmadd_ps(qv, k[r], acc[g][r]);
        }
      }
      for (size_t g = 0; g < kHeads; ++g) {
        _mm_storeu_ps(scores + (h + g) * stride + s,
                      _mm_mul_ps(hsum4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]), _mm_set1_ps(scale)));
      }
    }
    for (size_t g = 0; g < kHeads; ++g)
      head_scores<T>(q + (h + g) * head_dim, keys, s, count, head_dim, scale, scores + (h + g) * stride);
  }
  for (; h < nq; ++h) head_scores<T>(q + h * head_dim, keys, 0, count, head_dim, scale, scores + h * stride);
}

// out[h] += probs[h] . values for `heads` query heads from h0, over one 64-float slice [i, i + 64) of the row:
// the slice of every head stays in registers while the block's rows stream by, each value vector loaded and
// widened once for all of them. Each output element sums over s in order, one fused multiply-add a row, whatever
// `heads` is: the bits do not depend on the tiling.
template <KvDType T, size_t heads>
KVS_ALWAYS_INLINE void values_slice(const float* probs, size_t stride, size_t h0, const void* values, size_t count,
                                    size_t head_dim, size_t i, float* out) {
  __mmask16 m[4];
  __m512 acc[heads][4];
#pragma GCC unroll 4
  for (size_t r = 0; r < 4; ++r) m[r] = lanes(i + 16 * r, head_dim);
  for (size_t g = 0; g < heads; ++g)
#pragma GCC unroll 4
    for (size_t r = 0; r < 4; ++r) acc[g][r] = _mm512_maskz_loadu_ps(m[r], out + (h0 + g) * head_dim + i + 16 * r);
  for (size_t s = 0; s < count; ++s) {
    __m512 v[4];
#pragma GCC unroll 4
    for (size_t r = 0; r < 4; ++r) v[r] = load16<T>(values, s * head_dim + i + 16 * r, m[r]);
#pragma GCC unroll 4
    for (size_t g = 0; g < heads; ++g) {
      const __m512 ps = _mm512_set1_ps(probs[(h0 + g) * stride + s]);
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) acc[g][r] = _mm512_fmadd_ps(ps, v[r], acc[g][r]);
    }
  }
  for (size_t g = 0; g < heads; ++g)
#pragma GCC unroll 4
    for (size_t r = 0; r < 4; ++r) _mm512_mask_storeu_ps(out + (h0 + g) * head_dim + i + 16 * r, m[r], acc[g][r]);
}

template <KvDType T>
void values_kernel(const float* probs, size_t stride, size_t nq, const void* values, size_t count, size_t head_dim,
                   float* out) {
  constexpr size_t kSlice = 64, kHeads = 4;  // floats of a head's output, heads, held in registers at once
  size_t h = 0;
  for (; h + kHeads <= nq; h += kHeads) {
    for (size_t i = 0; i < head_dim; i += kSlice)
      values_slice<T, kHeads>(probs, stride, h, values, count, head_dim, i, out);
  }
  for (; h < nq; ++h) {
    for (size_t i = 0; i < head_dim; i += kSlice) values_slice<T, 1>(probs, stride, h, values, count, head_dim, i, out);
  }
}

// fp32_to_bf16 on 16 lanes: round to nearest even, NaNs made quiet.
KVS_ALWAYS_INLINE __m256i to_bf16(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

}  // namespace

void attention_block_scores_avx512(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                                   float* scores, size_t stride) {
  with_kv_element_type(
      keys.type, [&]<KvDType T>() { scores_kernel<T>(q, nq, keys.data, count, head_dim, scale, scores, stride); });
}

void attention_block_values_avx512(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                                   size_t head_dim, float* out) {
  with_kv_element_type(values.type,
                       [&]<KvDType T>() { values_kernel<T>(probs, stride, nq, values.data, count, head_dim, out); });
}

void store_kv_row_avx512(KvDType type, const float* src, void* dst, size_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(i, n);
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    const __m256i h =
        type == KvDType::kF16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) : to_bf16(v);
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
}

}  // namespace kvs::detail
