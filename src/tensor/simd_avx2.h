// Inline helpers for *_avx2.cpp files only (they need the AVX2/FMA compile flags). The namespace keeps
// these apart from the AVX-512 versions of the same helpers.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#define KVS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvs::avx2 {

KVS_ALWAYS_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [sum a, sum b, sum c, sum d]
KVS_ALWAYS_INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// hsum4's sum of one vector (the same tree, bit for bit) without its horizontal adds.
KVS_ALWAYS_INLINE float hsum1(__m256 t) {
  const __m256 u = _mm256_add_ps(t, _mm256_permute_ps(t, 0xb1));  // t0 + t1, t2 + t3 at lanes 0, 2 (4, 6)
  const __m256 v = _mm256_add_ps(u, _mm256_permute_ps(u, 0x4e));  // (t0 + t1) + (t2 + t3) at lane 0 (4)
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// The canonical horizontal sums of the matmul kernels: sums[i] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) +
// (a6 + a7)) with a = acc[i] (hsum4's tree, or hsum1's: the same; not hsum's). Every sum depends on its
// own vector only, so how many vectors are reduced together never changes a sum's bits.
template <size_t N>
KVS_ALWAYS_INLINE void reduce_sums(const __m256* acc, float* sums) {
  size_t i = 0;
  for (; i + 4 <= N; i += 4) _mm_storeu_ps(sums + i, hsum4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]));
  if constexpr (N % 4 == 3) {
    float four[4];
    _mm_storeu_ps(four, hsum4(acc[i], acc[i + 1], acc[i + 2], acc[i + 2]));
    for (size_t k = 0; k < 3; ++k) sums[i + k] = four[k];
  } else {
    for (; i < N; ++i) sums[i] = hsum1(acc[i]);
  }
}

// Mask for _mm256_maskload_ps / maskstore of the first n (< 8) lanes.
KVS_ALWAYS_INLINE __m256i tail_mask8(size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// e^x, max relative error about 2e-7: x > 88.73 gives inf, x < -104 gives 0 (subnormal results are
// scaled in two steps so they stay accurate), nan stays nan.
KVS_ALWAYS_INLINE __m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-105.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));  // nan passes
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n = 2^a * 2^b with a = n >> 1, b = n - a, each in [-76, 65]: both factors are normal floats.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i a = _mm256_srai_epi32(ni, 1);
  const __m256i b = _mm256_sub_epi32(ni, a);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 pa = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(a, bias), 23));
  const __m256 pb = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(b, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, pa), pb);
}

}  // namespace kvs::avx2
