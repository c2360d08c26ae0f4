// AVX-512 versions of the small kernels; column tails use masked loads and stores.
#include "tensor/ops_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

namespace {

KVS_ALWAYS_INLINE __mmask16 mask_at(size_t i, size_t n) { return n - i >= 16 ? __mmask16(0xffff) : tail_mask16(n - i); }

}  // namespace

float dot_f32_avx512(const float* a, const float* b, size_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16 * k), _mm512_loadu_ps(b + i + 16 * k), acc[k]);
  for (; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    acc[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc[0]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

void axpy_f32_avx512(float a, const float* x, float* y, size_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

double sum_squares_avx512(const float* x, size_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (size_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(mask_at(i, n), x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
    acc0 = _mm512_fmadd_pd(lo, lo, acc0);
    acc1 = _mm512_fmadd_pd(hi, hi, acc1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

void scale_mul_avx512(float* out, const float* x, const float* weight, float scale, size_t n) {
  const __m512 s = _mm512_set1_ps(scale);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    const __m512 v =
        _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s), _mm512_maskz_loadu_ps(m, weight + i));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

void softmax_avx512(float* x, size_t n) {
  __m512 maxv = _mm512_set1_ps(-__builtin_inff());
  for (size_t i = 0; i < n; i += 16)
    maxv = _mm512_max_ps(maxv, _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), mask_at(i, n), x + i));
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(maxv));
  __m512 sum = _mm512_setzero_ps();
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max));
    sum = _mm512_mask_add_ps(sum, m, sum, e);
    _mm512_mask_storeu_ps(x + i, m, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

void swiglu_avx512(float* gate, const float* up, size_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void geglu_avx512(float* gate, const float* up, size_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), a = _mm512_set1_ps(kGeluA), b = _mm512_set1_ps(kGeluB);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_at(i, n);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_ps(_mm512_mul_ps(g, _mm512_fmadd_ps(_mm512_mul_ps(g, g), b, a)));
    _mm512_mask_storeu_ps(gate + i, m,
                          _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace kvs::detail
