// AVX-512 VNNI matmul over packed block-quantized weights in groups of 16 rows
// (tensor/packed_weights.h): one vpdpbusd takes a 64-byte quad (16 rows x 4 columns) and 4 broadcast activation bytes
// (packed_matmul_impl.h).
#include <cstring>

#include "tensor/packed_matmul_impl.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

struct Avx512Ops {
  using I = __m512i;
  using V = __m512;
  static constexpr size_t kLanes = 16;
  static constexpr size_t kTileGroups = 2;       // each activation broadcast feeds 2 vpdpbusd
  static constexpr size_t kMaxTokens = 6;        // 2 x 6 x (int32 sums + fp32 accumulators) = 24 of the 32 registers
  static constexpr size_t kMaxTokensKQuant = 4;  // 2 x 4 x (sums + super-block sums + accumulators) = 24
  static constexpr bool kVnni = true;

  static KVS_ALWAYS_INLINE I load(const std::byte* p) { return _mm512_load_si512(p); }
  static KVS_ALWAYS_INLINE I bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
  }
  static KVS_ALWAYS_INLINE I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static KVS_ALWAYS_INLINE I zero() { return _mm512_setzero_si512(); }
  static KVS_ALWAYS_INLINE I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static KVS_ALWAYS_INLINE I add16(I a, I b) { return _mm512_add_epi16(a, b); }
  static KVS_ALWAYS_INLINE I dpbusd(I acc, I u, I a) { return _mm512_dpbusd_epi32(acc, u, a); }
  static KVS_ALWAYS_INLINE I low_nibbles(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0f)); }
  static KVS_ALWAYS_INLINE I srl4(I v) { return _mm512_srli_epi16(v, 4); }
  static KVS_ALWAYS_INLINE I table16(const void* p) {
    return _mm512_broadcast_i32x4(_mm_load_si128(static_cast<const __m128i*>(p)));
  }
  static KVS_ALWAYS_INLINE I lookup16(I table, I v) { return _mm512_shuffle_epi8(table, v); }
  static KVS_ALWAYS_INLINE V scales(const std::byte* p) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static KVS_ALWAYS_INLINE V bytes_ps(const std::byte* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static KVS_ALWAYS_INLINE V sbytes_ps(const std::byte* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static KVS_ALWAYS_INLINE I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static KVS_ALWAYS_INLINE I and8(I v, int8_t m) { return _mm512_and_si512(v, _mm512_set1_epi8(m)); }
  static KVS_ALWAYS_INLINE I sll16(I v, unsigned n) { return _mm512_slli_epi16(v, n); }
  static KVS_ALWAYS_INLINE I srl16(I v, unsigned n) { return _mm512_srli_epi16(v, n); }
  static KVS_ALWAYS_INLINE V cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static KVS_ALWAYS_INLINE V set1_ps(float v) { return _mm512_set1_ps(v); }
  static KVS_ALWAYS_INLINE V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static KVS_ALWAYS_INLINE V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static KVS_ALWAYS_INLINE V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static KVS_ALWAYS_INLINE V zero_ps() { return _mm512_setzero_ps(); }
  static KVS_ALWAYS_INLINE V load_y(const float* p, size_t n) { return _mm512_maskz_loadu_ps(tail_mask16(n), p); }
  static KVS_ALWAYS_INLINE void store_y(float* p, V v, size_t n) { _mm512_mask_storeu_ps(p, tail_mask16(n), v); }
};

}  // namespace

MatmulRowsFn packed_kernel_avx512(DType type) { return packed_kernel_for<Avx512Ops>(type); }

}  // namespace kvs::detail
