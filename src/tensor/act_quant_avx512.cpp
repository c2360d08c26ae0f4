// AVX-512 activation conversion; bit-identical to the scalar versions in act_quant.cpp.
#include "tensor/act_quant_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

void quantize_blocks_avx512(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (size_t b = 0; b < n_blocks; ++b, x += 32, qs += 32) {
    const __m512 v0 = _mm512_loadu_ps(x);
    const __m512 v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, abs_mask), _mm512_and_ps(v1, abs_mask)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));  // nearest even
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
    scales[b] = d;
    offsets[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));  // |q| <= 127: no saturation above
  }
}

// fp32_to_bf16 in integer arithmetic: add 0x7fff + lsb and truncate; nan becomes a quiet nan.
void to_bf16_avx512(const float* x, size_t n, uint16_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  size_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask16(n - i);
    const __m512i v = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, abs_mask), inf);
    r = _mm512_mask_or_epi32(r, is_nan, _mm512_srli_epi32(v, 16), _mm512_set1_epi32(0x40));
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
  }
}

}  // namespace kvs::detail
