// AVX-512 attention block kernels. Scores: four key rows at a time against one query head, reduced
// together (hsum4); values: a 64-float slice of a head's output stays in registers while the block's
// value rows stream by. Ragged head dims use masked loads and stores.
#include "tensor/attention_ops_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

namespace {

// Lanes of the 16-float vector at offset i that lie inside [0, n).
KVS_ALWAYS_INLINE __mmask16 lanes(size_t i, size_t n) {
  return i >= n ? __mmask16(0) : n - i >= 16 ? __mmask16(0xffff) : tail_mask16(n - i);
}

}  // namespace

void attention_block_scores_avx512(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim,
                                   float scale, float* scores, size_t stride) {
  for (size_t h = 0; h < nq; ++h) {
    const float* qh = q + h * head_dim;
    float* out = scores + h * stride;
    size_t s = 0;
    for (; s + 4 <= count; s += 4) {
      const float* k = keys + s * head_dim;
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (size_t i = 0; i < head_dim; i += 16) {
        const __mmask16 m = lanes(i, head_dim);
        const __m512 qv = _mm512_maskz_loadu_ps(m, qh + i);
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r)
          acc[r] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k + r * head_dim + i), acc[r]);
      }
      _mm_storeu_ps(out + s, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
    }
    for (; s < count; ++s) {
      const float* k = keys + s * head_dim;
      __m512 acc = _mm512_setzero_ps();
      for (size_t i = 0; i < head_dim; i += 16) {
        const __mmask16 m = lanes(i, head_dim);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qh + i), _mm512_maskz_loadu_ps(m, k + i), acc);
      }
      out[s] = hsum1(acc) * scale;
    }
  }
}

void attention_block_values_avx512(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                                   size_t head_dim, float* out) {
  constexpr size_t kSlice = 64;  // floats of the output held in registers
  for (size_t h = 0; h < nq; ++h) {
    const float* p = probs + h * stride;
    float* oh = out + h * head_dim;
    for (size_t i = 0; i < head_dim; i += kSlice) {
      __mmask16 m[4];
      __m512 acc[4];
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) {
        m[r] = lanes(i + 16 * r, head_dim);
        acc[r] = _mm512_maskz_loadu_ps(m[r], oh + i + 16 * r);
      }
      for (size_t s = 0; s < count; ++s) {
        const __m512 ps = _mm512_set1_ps(p[s]);
        const float* v = values + s * head_dim + i;
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(ps, _mm512_maskz_loadu_ps(m[r], v + 16 * r), acc[r]);
      }
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) _mm512_mask_storeu_ps(oh + i + 16 * r, m[r], acc[r]);
    }
  }
}

}  // namespace kvs::detail
