#include <immintrin.h>

#include "bench/probe_internal.h"

namespace kvs::detail {

int32_t dot_loop_avxvnni(size_t iters, int32_t seed) {
  __m256i acc[kFmaChains];
  for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm256_set1_epi32(seed + k);
  const __m256i w = _mm256_set1_epi8(3), a = _mm256_set1_epi8(-5);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], w, a);
  }
  __m256i s = _mm256_setzero_si256();
  for (int k = 0; k < kFmaChains; ++k) s = _mm256_add_epi32(s, acc[k]);
  return _mm256_extract_epi32(s, 0) ^ _mm256_extract_epi32(s, 7);
}

}  // namespace kvs::detail
