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

// Elements [i, i + 16) of a row of T, all inside it, as fp32.
template <KvDType T>
KVS_ALWAYS_INLINE __m512 load16(const void* row, size_t i) {
  if constexpr (T == KvDType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
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

// One 16-element chunk [i, i + 16) of scores_tile's sums; kMasked: the ragged end of a row, lanes past it zero.
template <KvDType T, size_t H, size_t R, bool kMasked>
KVS_ALWAYS_INLINE void scores_chunk(const float* q, const void* keys, size_t s, size_t head_dim, size_t i,
                                    __m512 (&acc)[H][R]) {
  const __mmask16 m = kMasked ? lanes(i, head_dim) : __mmask16(0xffff);
  __m512 k[R];
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
    k[r] = kMasked ? load16<T>(keys, (s + r) * head_dim + i, m) : load16<T>(keys, (s + r) * head_dim + i);
#pragma GCC unroll 16
  for (size_t g = 0; g < H; ++g) {
    const float* qg = q + g * head_dim + i;
    __m512 qv = kMasked ? _mm512_maskz_loadu_ps(m, qg) : _mm512_loadu_ps(qg);
    asm("" : "+v"(qv));  // one load for the R rows: GCC would fold a load into each multiply-add
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) acc[g][r] = _mm512_fmadd_ps(qv, k[r], acc[g][r]);
  }
}

// Query heads [0, H) of q against rows [s, s + R) of the keys, H x R sums in registers: each key vector is
// loaded and widened once for the H heads, each query vector once for the R rows. Whole vectors go without masks
// (masked loads cost more), the ragged end with them. Every (head, row) sum runs over the same elements in the
// same order as head_scores, reduced by the same tree (reduce_sums), so the bits do not depend on the tiling.
template <KvDType T, size_t H, size_t R>
KVS_ALWAYS_INLINE void scores_tile(const float* q, const void* keys, size_t s, size_t head_dim, float scale,
                                   float* scores, size_t stride) {
  __m512 acc[H][R];
#pragma GCC unroll 16
  for (size_t g = 0; g < H; ++g)
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) acc[g][r] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= head_dim; i += 16) scores_chunk<T, H, R, false>(q, keys, s, head_dim, i, acc);
  if (i < head_dim) scores_chunk<T, H, R, true>(q, keys, s, head_dim, i, acc);
  float sums[H * R];
  reduce_sums<H * R>(&acc[0][0], sums);
  for (size_t g = 0; g < H; ++g)
    for (size_t r = 0; r < R; ++r) scores[g * stride + s + r] = sums[g * R + r] * scale;
}

// Heads [h_begin, h_end) of q, a multiple of H, against rows [0, count): rows outer, R at a time against every H of
// the range while they are in L1, then the rows left over head by head.
template <KvDType T, size_t H, size_t R>
KVS_ALWAYS_INLINE void scores_heads(const float* q, size_t h_begin, size_t h_end, const void* keys, size_t count,
                                    size_t head_dim, float scale, float* scores, size_t stride) {
  size_t s = 0;
  for (; s + R <= count; s += R)
    for (size_t h = h_begin; h < h_end; h += H)
      scores_tile<T, H, R>(q + h * head_dim, keys, s, head_dim, scale, scores + h * stride, stride);
  for (size_t g = h_begin; g < h_end; ++g)
    head_scores<T>(q + g * head_dim, keys, s, count, head_dim, scale, scores + g * stride);
}

// Query heads that share the keys (a GQA/MQA group; an MLA latent's 16): eight heads over two rows at a time
// (16 sums, two widenings per 16 multiply-adds), then four over four, then head by head.
template <KvDType T>
void scores_kernel(const float* q, size_t nq, const void* keys, size_t count, size_t head_dim, float scale,
                   float* scores, size_t stride) {
  const size_t eights = nq / 8 * 8, fours = eights + (nq - eights) / 4 * 4;
  scores_heads<T, 8, 2>(q, 0, eights, keys, count, head_dim, scale, scores, stride);
  scores_heads<T, 4, 4>(q, eights, fours, keys, count, head_dim, scale, scores, stride);
  for (size_t h = fours; h < nq; ++h)
    head_scores<T>(q + h * head_dim, keys, 0, count, head_dim, scale, scores + h * stride);
}

// Rows a values_slice call takes at most: their probabilities, copied head-minor, fit a few cache lines.
constexpr size_t kValueRows = 16;

// out[h] += pt[s][h] * values[s] for `heads` query heads (out: their rows, head_dim apart) over one slice [i, i + 16 V)
// of the row, rows s < count <= kValueRows; pt: the rows' probabilities, `heads` a row. The slice of every head
// stays in registers while the rows stream by, each value vector loaded and widened once for all of them, each
// probability broadcast once for the V vectors. kMasked: the slice passes the row's end (lanes past it masked).
// Each output element sums over s in order, one fused multiply-add a row, whatever `heads`, V and the number of
// calls a block takes are: the bits do not depend on the tiling.
template <KvDType T, size_t heads, size_t V, bool kMasked>
KVS_ALWAYS_INLINE void values_slice(const float* pt, const void* values, size_t count, size_t head_dim, size_t i,
                                    float* out) {
  __mmask16 m[V];
  __m512 acc[heads][V];
#pragma GCC unroll 4
  for (size_t r = 0; r < V; ++r) m[r] = kMasked ? lanes(i + 16 * r, head_dim) : __mmask16(0xffff);
#pragma GCC unroll 16
  for (size_t g = 0; g < heads; ++g)
#pragma GCC unroll 4
    for (size_t r = 0; r < V; ++r) {
      float* o = out + g * head_dim + i + 16 * r;
      acc[g][r] = kMasked ? _mm512_maskz_loadu_ps(m[r], o) : _mm512_loadu_ps(o);
    }
  for (size_t s = 0; s < count; ++s) {
    __m512 v[V];
#pragma GCC unroll 4
    for (size_t r = 0; r < V; ++r) {
      const size_t at = s * head_dim + i + 16 * r;
      v[r] = kMasked ? load16<T>(values, at, m[r]) : load16<T>(values, at);
    }
#pragma GCC unroll 16
    for (size_t g = 0; g < heads; ++g) {
      __m512 ps = _mm512_set1_ps(pt[s * heads + g]);
      if constexpr (V > 1) asm("" : "+v"(ps));  // one broadcast for the V vectors: GCC would fold one into each
#pragma GCC unroll 4
      for (size_t r = 0; r < V; ++r) acc[g][r] = _mm512_fmadd_ps(ps, v[r], acc[g][r]);
    }
  }
#pragma GCC unroll 16
  for (size_t g = 0; g < heads; ++g)
#pragma GCC unroll 4
    for (size_t r = 0; r < V; ++r) {
      float* o = out + g * head_dim + i + 16 * r;
      if constexpr (kMasked) {
        _mm512_mask_storeu_ps(o, m[r], acc[g][r]);
      } else {
        _mm512_storeu_ps(o, acc[g][r]);
      }
    }
}

// Heads [h0, h0 + heads) over the whole row, kValueRows rows at a time.
template <KvDType T, size_t heads, size_t V>
KVS_ALWAYS_INLINE void values_heads(const float* probs, size_t stride, size_t h0, const void* values, size_t count,
                                    size_t head_dim, float* out) {
  constexpr size_t kSlice = 16 * V;
  const size_t whole = head_dim / kSlice * kSlice;
  float pt[kValueRows * heads];  // [row][head]: the broadcasts' one base address
  for (size_t s0 = 0; s0 < count; s0 += kValueRows) {
    const size_t rows = count - s0 < kValueRows ? count - s0 : kValueRows;
    for (size_t s = 0; s < rows; ++s)
      for (size_t g = 0; g < heads; ++g) pt[s * heads + g] = probs[(h0 + g) * stride + s0 + s];
    constexpr size_t kBytes = T == KvDType::kF32 ? 4 : 2;
    const void* block_rows = static_cast<const std::byte*>(values) + s0 * head_dim * kBytes;
    float* o = out + h0 * head_dim;
    for (size_t i = 0; i < whole; i += kSlice) values_slice<T, heads, V, false>(pt, block_rows, rows, head_dim, i, o);
    if (whole < head_dim) values_slice<T, heads, V, true>(pt, block_rows, rows, head_dim, whole, o);
  }
}

// Eight heads over 32-float slices (two widenings and eight broadcasts per 16 multiply-adds), then four over 64,
// then one.
template <KvDType T>
void values_kernel(const float* probs, size_t stride, size_t nq, const void* values, size_t count, size_t head_dim,
                   float* out) {
  size_t h = 0;
  for (; h + 8 <= nq; h += 8) values_heads<T, 8, 2>(probs, stride, h, values, count, head_dim, out);
  for (; h + 4 <= nq; h += 4) values_heads<T, 4, 4>(probs, stride, h, values, count, head_dim, out);
  for (; h < nq; ++h) values_heads<T, 1, 4>(probs, stride, h, values, count, head_dim, out);
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
