// AVX2 activation conversion; bit-identical to the scalar versions in act_quant.cpp.
#include <cstring>

#include "tensor/act_quant_internal.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {

void quantize_blocks_avx2(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (size_t b = 0; b < n_blocks; ++b, x += 32, qs += 32) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      m = _mm256_max_ps(m, _mm256_and_ps(v[k], abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));  // nearest even
    // Packing interleaves 128-bit lanes; the permute puts the 32 bytes back in order.
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), p8);
    scales[b] = d;
    // |q| <= 127, so the saturating packs above kept every value.
    const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    offsets[b] = -128 * _mm_cvtsi128_si32(s4);
  }
}

namespace {

// Eight values: fp32_to_bf16 in integer arithmetic (add 0x7fff + lsb, truncate; nan becomes quiet).
KVS_ALWAYS_INLINE __m128i bf16_round8(__m256i v) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(0x40));
  // Signed compare is fine: both sides are non-negative.
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
  const __m256i res = _mm256_blendv_epi8(r, quiet, is_nan);
  // Values fit 16 bits, so the unsigned-saturating pack is exact; the permute undoes its lane interleave.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(res, res), 0x08);
  return _mm256_castsi256_si128(packed);
}

}  // namespace

// (No shared inline helpers such as core/half.h here: the linker could pick this file's AVX2 copy for
// baseline callers.)
void to_bf16_avx2(const float* x, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), bf16_round8(v));
  }
  if (i < n) {
    float in[8] = {};
    uint16_t res[8];
    std::memcpy(in, x + i, (n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(res), bf16_round8(_mm256_castps_si256(_mm256_loadu_ps(in))));
    std::memcpy(out + i, res, (n - i) * sizeof(uint16_t));
  }
}

}  // namespace kvs::detail
