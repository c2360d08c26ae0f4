// AVX2 versions of the small kernels; column tails use masked loads and stores.
#include "tensor/ops_internal.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {

using namespace kvs::avx2;

float dot_f32_avx2(const float* a, const float* b, size_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    acc[1] = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc[1]);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void axpy_f32_avx2(float a, const float* x, float* y, size_t n) {
  const __m256 av = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(av, _mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m)));
  }
}

double sum_squares_avx2(const float* x, size_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  for (size_t i = 0; i < n; i += 8) {
    const __m256 v = i + 8 <= n ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, tail_mask8(n - i));
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    acc0 = _mm256_fmadd_pd(lo, lo, acc0);
    acc1 = _mm256_fmadd_pd(hi, hi, acc1);
  }
  const __m256d s = _mm256_add_pd(acc0, acc1);
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

void scale_mul_avx2(float* out, const float* x, const float* weight, float scale, size_t n) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(weight + i)));
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(
        out + i, m, _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), s), _mm256_maskload_ps(weight + i, m)));
  }
}

void softmax_avx2(float* x, size_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 maxv = neg_inf;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) maxv = _mm256_max_ps(maxv, _mm256_loadu_ps(x + i));
  float max = -__builtin_inff();
  {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, maxv);
    for (float v : lanes) max = v > max ? v : max;
    for (size_t k = i; k < n; ++k) max = x[k] > max ? x[k] : max;
  }
  const __m256 maxb = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), maxb));
    sum = _mm256_add_ps(sum, e);
    _mm256_storeu_ps(x + i, e);
  }
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), maxb)), _mm256_castsi256_ps(m));
    sum = _mm256_add_ps(sum, e);
    _mm256_maskstore_ps(x + i, m, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
  }
}

void swiglu_avx2(float* gate, const float* up, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const auto f = [&](__m256 g, __m256 u) {
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g)))), u);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, f(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(gate + i, m, f(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

void geglu_avx2(float* gate, const float* up, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), a = _mm256_set1_ps(kGeluA), b = _mm256_set1_ps(kGeluB);
  const auto f = [&](__m256 g, __m256 u) {
    const __m256 e = exp_ps(_mm256_mul_ps(g, _mm256_fmadd_ps(_mm256_mul_ps(g, g), b, a)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, f(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(gate + i, m, f(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

}  // namespace kvs::detail
