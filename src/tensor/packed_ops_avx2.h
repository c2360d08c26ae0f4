// The 256-bit vector operations of the packed matmul (packed_matmul_impl.h) for matmul_packed_avx2.cpp and
// matmul_packed_avxvnni.cpp only (compiled with AVX2 enabled); internal linkage, one copy per file.
// Without VNNI the quad dot products are vpmaddubsw + vpmaddwd; the AVX-VNNI file adds dpbusd.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

struct Avx2PackedOps {
  using I = __m256i;
  using V = __m256;
  static constexpr size_t kLanes = 8;
  static constexpr size_t kTileGroups = 2;       // each activation broadcast feeds 2 groups
  static constexpr size_t kMaxTokens = 3;        // 2 x 3 x (int32 sums + fp32 accumulators) + weights of 16 registers
  static constexpr size_t kMaxTokensKQuant = 2;  // 2 x 2 x (sums + super-block sums + accumulators) + weights
  static constexpr bool kVnni = false;

  static KVS_ALWAYS_INLINE I load(const std::byte* p) { return _mm256_load_si256(reinterpret_cast<const I*>(p)); }
  static KVS_ALWAYS_INLINE I bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
  }
  static KVS_ALWAYS_INLINE I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static KVS_ALWAYS_INLINE I zero() { return _mm256_setzero_si256(); }
  static KVS_ALWAYS_INLINE I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static KVS_ALWAYS_INLINE I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static KVS_ALWAYS_INLINE I maddubs(I u, I s) { return _mm256_maddubs_epi16(u, s); }
  static KVS_ALWAYS_INLINE I madd_ones(I v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }
  static KVS_ALWAYS_INLINE I sign8(I a, I w) { return _mm256_sign_epi8(a, w); }
  static KVS_ALWAYS_INLINE I abs8(I w) { return _mm256_abs_epi8(w); }  // -128 stays 0x80: 128 unsigned
  static KVS_ALWAYS_INLINE I xor80(I u) { return _mm256_xor_si256(u, _mm256_set1_epi8(-128)); }
  static KVS_ALWAYS_INLINE I low_nibbles(I v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
  static KVS_ALWAYS_INLINE I srl4(I v) { return _mm256_srli_epi16(v, 4); }
  static KVS_ALWAYS_INLINE I table16(const void* p) {
    return _mm256_broadcastsi128_si256(_mm_load_si128(static_cast<const __m128i*>(p)));
  }
  static KVS_ALWAYS_INLINE I lookup16(I table, I v) { return _mm256_shuffle_epi8(table, v); }
  static KVS_ALWAYS_INLINE V scales(const std::byte* p) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static KVS_ALWAYS_INLINE V bytes_ps(const std::byte* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static KVS_ALWAYS_INLINE V sbytes_ps(const std::byte* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static KVS_ALWAYS_INLINE I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static KVS_ALWAYS_INLINE I and8(I v, int8_t m) { return _mm256_and_si256(v, _mm256_set1_epi8(m)); }
  static KVS_ALWAYS_INLINE I sll16(I v, unsigned n) { return _mm256_slli_epi16(v, static_cast<int>(n)); }
  static KVS_ALWAYS_INLINE I srl16(I v, unsigned n) { return _mm256_srli_epi16(v, static_cast<int>(n)); }
  static KVS_ALWAYS_INLINE V cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static KVS_ALWAYS_INLINE V set1_ps(float v) { return _mm256_set1_ps(v); }
  static KVS_ALWAYS_INLINE V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static KVS_ALWAYS_INLINE V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static KVS_ALWAYS_INLINE V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static KVS_ALWAYS_INLINE V zero_ps() { return _mm256_setzero_ps(); }
  static KVS_ALWAYS_INLINE V load_y(const float* p, size_t n) {
    return n == kLanes ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, avx2::tail_mask8(n));
  }
  static KVS_ALWAYS_INLINE void store_y(float* p, V v, size_t n) {
    if (n == kLanes) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, avx2::tail_mask8(n), v);
    }
  }
};

}  // namespace
}  // namespace kvs::detail
