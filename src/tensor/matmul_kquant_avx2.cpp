// AVX2 matmul for K-quant weights (Q2_K..Q6_K, core/dtype.h) with int8 block activations (QuantizedActivations),
// one super-block per step, in kquant_simd.h's integer form. Per row and token, for each 32-value block b of the
// super-block, I1_b = madd(maddubs(r_b, a_b), scale) (8 int32 lanes, exact) goes into fp32 as
//   part[b % 2] += float(I1_b) * d_a[b]
// and at the end of the super-block
//   acc += (part[0] + part[1]) * d - (float(madd(min, S)) * d_a[0..8)) * dmin
// (the min/offset terms of all 8 blocks at once, from the activations' group sums S). The scalar reference
// (matmul.cpp) does the same integer arithmetic with other fp32 sums.
#include "core/dtype.h"
#include "tensor/kquant_simd.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx2;

// Lanes 0-7 = scale[2j], lanes 8-15 = scale[2j + 1] (int16): block j's two groups.
KVS_ALWAYS_INLINE __m256i block_scale(__m256i scale, size_t j) {
  const __m256i pair = _mm256_permutevar8x32_epi32(scale, _mm256_set1_epi32(static_cast<int>(j)));
  return _mm256_shuffle_epi8(pair, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2,
                                                    3, 2, 3, 2, 3, 2, 3, 2, 3));
}

template <class W>
struct KQuantKernel : KQuantKernelBase {
  using Vec = __m256;
  static constexpr size_t kMaxTokens = 2;

  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const std::byte* blk[R];
    SuperBlockScales s[R];
    for (size_t i = 0; i < R; ++i) {
      blk[i] = p.w[i] + n * p.block_bytes;
      s[i] = W::scales(blk[i]);
    }
    __m256 part[2][T][R];
    for (size_t t = 0; t < T; ++t)
      for (size_t i = 0; i < R; ++i) part[0][t][i] = part[1][t][i] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      __m256i r[R], scale[R];
      for (size_t i = 0; i < R; ++i) {
        r[i] = W::unpack(blk[i], j);
        scale[i] = block_scale(s[i].scale, j);
      }
      for (size_t t = 0; t < T; ++t) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.a[t] + n * kStep + 32 * j));
        const __m256 da = _mm256_broadcast_ss(p.d[t] + 8 * n + j);
        for (size_t i = 0; i < R; ++i) {
          const __m256i i1 = _mm256_madd_epi16(_mm256_maddubs_epi16(r[i], a), scale[i]);
          part[j % 2][t][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), da, part[j % 2][t][i]);
        }
      }
    }
    for (size_t t = 0; t < T; ++t) {
      const __m256 da8 = _mm256_loadu_ps(p.d[t] + 8 * n);
      const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.s[t] + 16 * n));
      for (size_t i = 0; i < R; ++i) {
        acc[t][i] = _mm256_fmadd_ps(_mm256_add_ps(part[0][t][i], part[1][t][i]), _mm256_set1_ps(s[i].d), acc[t][i]);
        const __m256 i2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s[i].min, sums)), da8);
        acc[t][i] = _mm256_fnmadd_ps(i2, _mm256_set1_ps(s[i].dmin), acc[t][i]);
      }
    }
  }

  static KVS_ALWAYS_INLINE Vec zero() { return _mm256_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  template <size_t N>
  static KVS_ALWAYS_INLINE void reduce(const Vec* acc, float* sums) {
    reduce_sums<N>(acc, sums);
  }
};

}  // namespace

void matmul_kquant_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run_k_quant<KQuantKernel>(op, row_begin, row_end, "matmul_kquant_avx2");
}

}  // namespace kvs::detail
