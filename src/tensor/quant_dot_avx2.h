// The integer dot products of the fused int8 / int4 key kernels (attention_quant_impl.h: I, izero,
// ihsum8, Keys, load_keys, dot_keys, quantize_query), in 256-bit AVX2 code, for the *_avx2.cpp and
// *_avx512.cpp files only (which are compiled with AVX2 enabled). A chunk's 32 key integers times 32
// integer query values, summed in int32:
//   int4 (0..15): one 16-byte load split into its nibbles, elements 0-15 and 16-31, times an int8
//                 query with _mm256_maddubs_epi16 (unsigned x signed; a pair sums to at most 2 x 15 x 127);
//   int8 (0..255): widened to 16 bits, times an int16 query of at most 16383 in magnitude with
//                 _mm256_madd_epi16, so a row of up to 512 elements sums to less than 2^31.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/kv_dtype.h"
#include "tensor/attention_quant_impl.h"

namespace kvs::detail {
// Internal linkage: each ISA's file gets its own copy, compiled with its own flags. (With external
// linkage the linker would keep one copy of these inline functions for both files, possibly the one
// built with AVX-512 enabled, for the AVX2 kernels of a CPU without it.)
namespace {

struct QuantDotAvx2 {
  using I = __m256i;
  static I izero() { return _mm256_setzero_si256(); }
  // sums[j] = the horizontal sum of a[j], for 8 vectors at once (a tree of pairwise adds).
  static void ihsum8(const I* a, int32_t* sums) {
    const __m256i s0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
    const __m256i s4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(a[4], a[5]), _mm256_hadd_epi32(a[6], a[7]));
    // Each 128-bit lane holds a half of every sum: add the lanes.
    const __m256i sums_v =
        _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20), _mm256_permute2x128_si256(s0123, s4567, 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums), sums_v);
  }

  // x (n floats, n a multiple of 32) as integers round(x / d), d = max |x| / quant::kQueryMax<T> (0 when x is
  // 0), rounded to nearest even; returns d.
  template <KvDType T>
  static float quantize_query(const float* x, size_t n, quant::QueryInt<T>* out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float a = _mm_cvtss_f32(m), levels = static_cast<float>(quant::kQueryMax<T>);
    const __m256 inv = _mm256_set1_ps(a > 0.0f ? levels / a : 0.0f);
    for (size_t i = 0; i < n; i += 32) {
      __m256i v[4];
      for (size_t j = 0; j < 4; ++j) v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), inv));
      // The packs work within 128-bit lanes: the permutations put the values back in order.
      const __m256i w01 = _mm256_packs_epi32(v[0], v[1]), w23 = _mm256_packs_epi32(v[2], v[3]);
      if constexpr (T == KvDType::kInt8) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute4x64_epi64(w01, 0xd8));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 16), _mm256_permute4x64_epi64(w23, 0xd8));
      } else {
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(out + i),
            _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      }
    }
    return a / levels;
  }

  // One chunk's 32 key integers, ready for dot_keys with any number of query rows: int4 its nibbles as
  // bytes (lo); int8 widened to 16 bits, elements 0-15 (lo) and 16-31 (hi).
  struct Keys {
    __m256i lo;
    __m256i hi;
  };
  template <KvDType T>
  static inline __attribute__((always_inline)) Keys load_keys(const uint8_t* chunk) {
    if constexpr (T == KvDType::kInt4) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk));
      const __m128i nibble = _mm_set1_epi8(0x0f);
      return {_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), nibble), _mm_and_si128(b, nibble)),
              _mm256_setzero_si256()};
    } else {
      return {_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk))),
              _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + 16)))};
    }
  }
  // acc plus the 32 products of the keys with 32 query integers.
  template <KvDType T>
  static inline __attribute__((always_inline)) I dot_keys(const Keys& k, const quant::QueryInt<T>* q, I acc) {
    if constexpr (T == KvDType::kInt4) {
      const __m256i pairs = _mm256_maddubs_epi16(k.lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
      return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    } else {
      const __m256i lo = _mm256_madd_epi16(k.lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
      const __m256i hi = _mm256_madd_epi16(k.hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16)));
      return _mm256_add_epi32(acc, _mm256_add_epi32(lo, hi));
    }
  }
};

}  // namespace
}  // namespace kvs::detail
