// AVX-512 matmul for K-quant weights (Q2_K..Q6_K) with int8 block activations: the AVX2 kernel's arithmetic
// (matmul_kquant_avx2.cpp, kquant_simd.h) two 32-value blocks per instruction. Per row and token, for the pair of
// blocks 2q, 2q + 1 of a super-block, I1 = madd(maddubs(r, a), scale) has 16 int32 lanes (0-7 block 2q, 8-15 block
// 2q + 1), and
//   part[q % 2] += float(I1) * [d_a[2q] x 8, d_a[2q + 1] x 8]
//   acc += (part[0] + part[1]) * d - (float(madd(min, S)) * d_a[0..8)) * dmin   (lanes 0-7; 8-15 get 0)
#include "core/dtype.h"
#include "tensor/kquant_simd.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

// int16 lanes 8k..8k+7 = scale[4q + k]: the four groups of blocks 2q, 2q + 1.
KVS_ALWAYS_INLINE __m512i pair_scale(__m256i scale, size_t q) {
  const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 0x10001, 0x10001, 0x10001, 0x10001, 0x20002, 0x20002, 0x20002,
                                            0x20002, 0x30003, 0x30003, 0x30003, 0x30003);
  const __m512i idx = _mm512_add_epi16(quarter, _mm512_set1_epi16(static_cast<int16_t>(4 * q)));
  return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(scale));
}

// Lanes 0-7 = da[2q], 8-15 = da[2q + 1].
KVS_ALWAYS_INLINE __m512 pair_da(__m256 da, size_t q) {
  const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i idx = _mm512_add_epi32(half, _mm512_set1_epi32(static_cast<int>(2 * q)));
  return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(da));
}

template <class W>
struct KQuantKernel : KQuantKernelBase {
  using Vec = __m512;
  static constexpr size_t kMaxTokens = 4;

  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const std::byte* blk[R];
    SuperBlockScales s[R];
    for (size_t i = 0; i < R; ++i) {
      blk[i] = p.w[i] + n * p.block_bytes;
      s[i] = W::scales(blk[i]);
    }
    __m256 da8[T];
    for (size_t t = 0; t < T; ++t) da8[t] = _mm256_loadu_ps(p.d[t] + 8 * n);
    __m512 part[2][T][R];
    for (size_t t = 0; t < T; ++t)
      for (size_t i = 0; i < R; ++i) part[0][t][i] = part[1][t][i] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (size_t q = 0; q < 4; ++q) {
      __m512i r[R], scale[R];
      for (size_t i = 0; i < R; ++i) {
        r[i] = _mm512_inserti64x4(_mm512_castsi256_si512(W::unpack(blk[i], 2 * q)), W::unpack(blk[i], 2 * q + 1), 1);
        scale[i] = pair_scale(s[i].scale, q);
      }
      for (size_t t = 0; t < T; ++t) {
        const __m512i a = _mm512_loadu_si512(p.a[t] + n * kStep + 64 * q);
        const __m512 da = pair_da(da8[t], q);
        for (size_t i = 0; i < R; ++i) {
          const __m512i i1 = _mm512_madd_epi16(_mm512_maddubs_epi16(r[i], a), scale[i]);
          part[q % 2][t][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), da, part[q % 2][t][i]);
        }
      }
    }
    for (size_t t = 0; t < T; ++t) {
      const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.s[t] + 16 * n));
      for (size_t i = 0; i < R; ++i) {
        acc[t][i] = _mm512_fmadd_ps(_mm512_add_ps(part[0][t][i], part[1][t][i]), _mm512_set1_ps(s[i].d), acc[t][i]);
        const __m256 i2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s[i].min, sums)), da8[t]);
        acc[t][i] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(i2), _mm512_set1_ps(s[i].dmin), acc[t][i]);
      }
    }
  }

  static KVS_ALWAYS_INLINE Vec zero() { return _mm512_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  template <size_t N>
  static KVS_ALWAYS_INLINE void reduce(const Vec* acc, float* sums) {
    reduce_sums<N>(acc, sums);
  }
};

}  // namespace

void matmul_kquant_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run_k_quant<KQuantKernel>(op, row_begin, row_end, "matmul_kquant_avx512");
}

}  // namespace kvs::detail
