// AVX2 attention block kernels: the AVX-512 scheme (see attention_ops_avx512.cpp) with 8-float vectors.
#include "tensor/attention_ops_internal.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {

using namespace kvs::avx2;

namespace {

// Mask of the lanes of the 8-float vector at offset i that lie inside [0, n).
KVS_ALWAYS_INLINE __m256i lanes(size_t i, size_t n) {
  return i >= n ? _mm256_setzero_si256() : n - i >= 8 ? _mm256_set1_epi32(-1) : tail_mask8(n - i);
}

}  // namespace

void attention_block_scores_avx2(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim,
                                 float scale, float* scores, size_t stride) {
  for (size_t h = 0; h < nq; ++h) {
    const float* qh = q + h * head_dim;
    float* out = scores + h * stride;
    size_t s = 0;
    for (; s + 4 <= count; s += 4) {
      const float* k = keys + s * head_dim;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (size_t i = 0; i < head_dim; i += 8) {
        const __m256i m = lanes(i, head_dim);
        const __m256 qv = _mm256_maskload_ps(qh + i, m);
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r)
          acc[r] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k + r * head_dim + i, m), acc[r]);
      }
      _mm_storeu_ps(out + s, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
    }
    for (; s < count; ++s) {
      const float* k = keys + s * head_dim;
      __m256 acc = _mm256_setzero_ps();
      for (size_t i = 0; i < head_dim; i += 8) {
        const __m256i m = lanes(i, head_dim);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(qh + i, m), _mm256_maskload_ps(k + i, m), acc);
      }
      out[s] = hsum1(acc) * scale;
    }
  }
}

void attention_block_values_avx2(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                                 size_t head_dim, float* out) {
  constexpr size_t kSlice = 32;  // floats of the output held in registers
  for (size_t h = 0; h < nq; ++h) {
    const float* p = probs + h * stride;
    float* oh = out + h * head_dim;
    for (size_t i = 0; i < head_dim; i += kSlice) {
      __m256i m[4];
      __m256 acc[4];
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) {
        m[r] = lanes(i + 8 * r, head_dim);
        acc[r] = _mm256_maskload_ps(oh + i + 8 * r, m[r]);
      }
      for (size_t s = 0; s < count; ++s) {
        const __m256 ps = _mm256_set1_ps(p[s]);
        const float* v = values + s * head_dim + i;
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r) acc[r] = _mm256_fmadd_ps(ps, _mm256_maskload_ps(v + 8 * r, m[r]), acc[r]);
      }
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) _mm256_maskstore_ps(oh + i + 8 * r, m[r], acc[r]);
    }
  }
}

}  // namespace kvs::detail
