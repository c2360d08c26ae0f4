// AVX2 attention block kernels: the AVX-512 scheme (see attention_ops_avx512.cpp) with 8-float vectors.
// f16 rows widen with F16C, bf16 rows with a 16-bit shift; a ragged tail of 16-bit elements goes through
// a zeroed 8-element buffer (AVX2 has no masked 16-bit loads).
#include <cstring>

#include "tensor/attention_ops_internal.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {

using namespace kvs::avx2;

namespace {

// Mask of the lanes of the 8-float vector at offset i that lie inside [0, n).
KVS_ALWAYS_INLINE __m256i lanes(size_t i, size_t n) {
  return i >= n ? _mm256_setzero_si256() : n - i >= 8 ? _mm256_set1_epi32(-1) : tail_mask8(n - i);
}

// 8 16-bit elements at p, of which the first `valid` (possibly more than 8) exist; missing ones are 0.
KVS_ALWAYS_INLINE __m128i load8_u16(const uint16_t* p, size_t valid) {
  if (valid >= 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  uint16_t tail[8] = {};
  std::memcpy(tail, p, valid * sizeof(uint16_t));
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(tail));
}

template <KvDType T>
constexpr size_t kElementBytes = T == KvDType::kF32 ? 4 : 2;

// Elements [i, i + 8) of a row of T and length n, as fp32; m = lanes(i, n).
template <KvDType T>
KVS_ALWAYS_INLINE __m256 load8(const void* row, size_t i, size_t n, __m256i m) {
  if constexpr (T == KvDType::kF32) {
    return _mm256_maskload_ps(static_cast<const float*>(row) + i, m);
  } else {
    const __m128i h = load8_u16(static_cast<const uint16_t*>(row) + i, i < n ? n - i : 0);
    if constexpr (T == KvDType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <KvDType T>
void scores_kernel(const float* q, size_t nq, const void* keys, size_t count, size_t head_dim, float scale,
                   float* scores, size_t stride) {
  for (size_t h = 0; h < nq; ++h) {
    const float* qh = q + h * head_dim;
    float* out = scores + h * stride;
    size_t s = 0;
    for (; s + 4 <= count; s += 4) {
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (size_t i = 0; i < head_dim; i += 8) {
        const __m256i m = lanes(i, head_dim);
        const __m256 qv = _mm256_maskload_ps(qh + i, m);
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r) {
          const void* k = static_cast<const char*>(keys) + (s + r) * head_dim * kElementBytes<T>;
          acc[r] = _mm256_fmadd_ps(qv, load8<T>(k, i, head_dim, m), acc[r]);
        }
      }
      _mm_storeu_ps(out + s, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
    }
    for (; s < count; ++s) {
      const void* k = static_cast<const char*>(keys) + s * head_dim * kElementBytes<T>;
      __m256 acc = _mm256_setzero_ps();
      for (size_t i = 0; i < head_dim; i += 8) {
        const __m256i m = lanes(i, head_dim);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(qh + i, m), load8<T>(k, i, head_dim, m), acc);
      }
      out[s] = hsum1(acc) * scale;
    }
  }
}

template <KvDType T>
void values_kernel(const float* probs, size_t stride, size_t nq, const void* values, size_t count, size_t head_dim,
                   float* out) {
  constexpr size_t kSlice = 32;  // floats of the output held in registers
  for (size_t h = 0; h < nq; ++h) {
    const float* p = probs + h * stride;
    float* oh = out + h * head_dim;
    for (size_t i = 0; i < head_dim; i += kSlice) {
      __m256i m[4];
      __m256 acc[4];
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) {
        m[r] = lanes(i + 8 * r, head_dim);
        acc[r] = _mm256_maskload_ps(oh + i + 8 * r, m[r]);
      }
      for (size_t s = 0; s < count; ++s) {
        const __m256 ps = _mm256_set1_ps(p[s]);
        const void* v = static_cast<const char*>(values) + s * head_dim * kElementBytes<T>;
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; ++r) acc[r] = _mm256_fmadd_ps(ps, load8<T>(v, i + 8 * r, head_dim, m[r]), acc[r]);
      }
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; ++r) _mm256_maskstore_ps(oh + i + 8 * r, m[r], acc[r]);
    }
  }
}

// fp32_to_bf16 on 8 lanes: round to nearest even, NaNs made quiet; the results in the low 16 bits of
// each 32-bit lane.
KVS_ALWAYS_INLINE __m256i to_bf16(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  // |x| > inf as signed 32-bit compares: both sides are non-negative.
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

}  // namespace

void attention_block_scores_avx2(const float* q, size_t nq, KvRows keys, size_t count, size_t head_dim, float scale,
                                 float* scores, size_t stride) {
  with_kv_element_type(
      keys.type, [&]<KvDType T>() { scores_kernel<T>(q, nq, keys.data, count, head_dim, scale, scores, stride); });
}

void attention_block_values_avx2(const float* probs, size_t stride, size_t nq, KvRows values, size_t count,
                                 size_t head_dim, float* out) {
  with_kv_element_type(values.type,
                       [&]<KvDType T>() { values_kernel<T>(probs, stride, nq, values.data, count, head_dim, out); });
}

void store_kv_row_avx2(KvDType type, const float* src, void* dst, size_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; i += 8) {
    const size_t valid = n - i < 8 ? n - i : 8;
    const __m256 v = _mm256_maskload_ps(src + i, lanes(i, n));
    __m128i h;
    if (type == KvDType::kF16) {
      h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
      const __m256i wide = to_bf16(v);  // [a0..a3 | a4..a7] in 32-bit lanes; pack within lanes, then join
      h = _mm_packus_epi32(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
    }
    if (valid == 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    } else {
      uint16_t tail[8];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(tail), h);
      std::memcpy(out + i, tail, valid * sizeof(uint16_t));
    }
  }
}

}  // namespace kvs::detail
