// Inline helpers for *_avx512.cpp files only (they need the AVX-512 compile flags). The namespace keeps
// these apart from the AVX2 versions of the same helpers.
#pragma once

// GCC 12's AVX-512 intrinsics start from deliberately undefined vectors and trip -Wuninitialized at -O2+
// (GCC bug 105593, fixed in GCC 13); silenced for the rest of each AVX-512 file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#define KVS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvs::avx512 {

// The first n (<= 16) lanes.
KVS_ALWAYS_INLINE __mmask16 tail_mask16(size_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
KVS_ALWAYS_INLINE __mmask32 tail_mask32(size_t n) { return static_cast<__mmask32>((uint64_t{1} << n) - 1u); }

// [sum a, sum b, sum c, sum d]
KVS_ALWAYS_INLINE __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
  const __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
  const __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// hsum4's sum of one vector (the same tree, bit for bit) without its horizontal adds.
KVS_ALWAYS_INLINE float hsum1(__m512 a) {
  const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m256 u = _mm256_add_ps(t, _mm256_permute_ps(t, 0xb1));  // t0 + t1, t2 + t3 at lanes 0, 2 (4, 6)
  const __m256 v = _mm256_add_ps(u, _mm256_permute_ps(u, 0x4e));  // (t0 + t1) + (t2 + t3) at lane 0 (4)
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// The canonical horizontal sums of the matmul kernels: sums[i] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) +
// (a6 + a7)) with a_k = acc[i][k] + acc[i][k + 8] (hsum4's tree, or hsum1's: the same). Every sum
// depends on its own vector only, so how many vectors are reduced together never changes a sum's bits.
template <size_t N>
KVS_ALWAYS_INLINE void reduce_sums(const __m512* acc, float* sums) {
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

// e^x, max relative error about 2e-7 over the whole float range: x > 88.73 gives inf, x < -104 gives
// 0 (subnormal results are correctly scaled by vscalefps), nan stays nan.
KVS_ALWAYS_INLINE __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-105.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));  // nan passes
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  // Cephes expf polynomial for e^r on |r| <= ln(2)/2.
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

}  // namespace kvs::avx512
