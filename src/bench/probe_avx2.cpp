#include "bench/probe_internal.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {

uint64_t read_bytes_avx2(const std::byte* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    for (size_t k = 0; k < 256; k += 128) {
      a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + k)));
      b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + k + 32)));
      c = _mm256_xor_si256(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + k + 64)));
      d = _mm256_xor_si256(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + k + 96)));
    }
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 1) ^ _mm256_extract_epi64(x, 2) ^
                               _mm256_extract_epi64(x, 3));
}

float fma_loop_avx2(size_t iters, float seed) {
  __m256 acc[kFmaChainsAvx2];
  for (int k = 0; k < kFmaChainsAvx2; ++k) acc[k] = _mm256_set1_ps(seed + static_cast<float>(k));
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-6f);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kFmaChainsAvx2; ++k) acc[k] = _mm256_fmadd_ps(acc[k], mul, add);
  }
  __m256 s = _mm256_setzero_ps();
  for (int k = 0; k < kFmaChainsAvx2; ++k) s = _mm256_add_ps(s, acc[k]);
  return avx2::hsum(s);
}

int32_t dot_loop_avx2(size_t iters, int32_t seed) {
  __m256i acc[kDotChainsAvx2], w[kDotChainsAvx2];
  for (int k = 0; k < kDotChainsAvx2; ++k) {
    acc[k] = _mm256_setzero_si256();
    w[k] = _mm256_set1_epi8(static_cast<char>(seed + k));
  }
  __m256i a = _mm256_set1_epi8(static_cast<char>(seed)), ones = _mm256_set1_epi16(1), step = _mm256_set1_epi8(1);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kDotChainsAvx2; ++k)
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(w[k], a), ones));
    a = _mm256_add_epi8(a, step);  // new activations every round: nothing can be hoisted
  }
  __m256i s = _mm256_setzero_si256();
  for (int k = 0; k < kDotChainsAvx2; ++k) s = _mm256_add_epi32(s, acc[k]);
  return _mm256_extract_epi32(s, 0) ^ _mm256_extract_epi32(s, 7);
}

}  // namespace kvs::detail
