// AVX2 instantiation of the fused int8 / int4 attention kernels (attention_quant_impl.h): 8-float
// vectors; an int8 chunk widens 8 bytes at a time, an int4 chunk is one 16-byte load split into its
// low and high nibbles (elements 0-15 and 16-31); keys per channel are integer dot products (quant_dot_avx2.h).
#include "core/half.h"
#include "tensor/attention_ops_internal.h"
#include "tensor/attention_quant_impl.h"
#include "tensor/quant_dot_avx2.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

struct Avx2 : QuantDotAvx2 {
  static constexpr size_t kLanes = 8;
  using F = __m256;
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static float hsum(F v) { return avx2::hsum1(v); }
  static void halves_to_floats(const uint16_t* h, float* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
    for (; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
  }
  static F widen(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }
  template <KvDType T>
  KVS_ALWAYS_INLINE static void load_chunk(const uint8_t* chunk, F* v) {
    if constexpr (T == KvDType::kInt8) {
      for (size_t j = 0; j < 4; ++j) v[j] = widen(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk + 8 * j)));
    } else {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk));
      const __m128i nibble = _mm_set1_epi8(0x0f);
      const __m128i lo = _mm_and_si128(b, nibble), hi = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
      v[0] = widen(lo);
      v[1] = widen(_mm_srli_si128(lo, 8));
      v[2] = widen(hi);
      v[3] = widen(_mm_srli_si128(hi, 8));
    }
  }
};

}  // namespace

void quant_block_scores_avx2(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                             float* scores, size_t stride) {
  quant::block_scores<Avx2>(q, nq, keys, count, head_dim, scale, scores, stride);
}

void quant_block_values_avx2(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t head_dim,
                             float* out) {
  quant::block_values<Avx2>(probs, stride, nq, values, count, head_dim, out);
}

}  // namespace kvs::detail
