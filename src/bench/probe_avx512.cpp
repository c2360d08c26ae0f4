#include "bench/probe_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

uint64_t read_bytes_avx512(const std::byte* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
  }
  const __m512i x = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(x));
}

float fma_loop_avx512(size_t iters, float seed) {
  __m512 acc[kFmaChains];
  for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm512_set1_ps(seed + static_cast<float>(k));
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-6f);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], mul, add);
  }
  __m512 s = _mm512_setzero_ps();
  for (int k = 0; k < kFmaChains; ++k) s = _mm512_add_ps(s, acc[k]);
  return _mm512_reduce_add_ps(s);
}

int32_t dot_loop_avx512(size_t iters, int32_t seed) {
  __m512i acc[kFmaChains];
  for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm512_set1_epi32(seed + k);
  const __m512i w = _mm512_set1_epi8(3), a = _mm512_set1_epi8(-5);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], w, a);
  }
  __m512i s = _mm512_setzero_si512();
  for (int k = 0; k < kFmaChains; ++k) s = _mm512_add_epi32(s, acc[k]);  // wraps: no signed overflow
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
}

}  // namespace kvs::detail
