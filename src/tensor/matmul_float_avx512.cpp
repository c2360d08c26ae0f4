// AVX-512 matmul for F32, F16 and BF16 weights with fp32 activations (exact inputs, fp32 FMA).
// Weights are widened to fp32 in registers; each widened vector feeds T tokens (see matmul_tiling.h).
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

// 16 weights at element c of a row, widened to fp32; the masked form zero-fills the lanes off `m`.
// kDecodeRowTile: rows streamed at once in decode, the fastest from DRAM as measured (Zen 5): one
// sequential stream for 2-byte weights, four for fp32 (whose single stream came out 30% slower).
struct LoadF32 {
  static constexpr size_t kDecodeRowTile = 4;
  static KVS_ALWAYS_INLINE __m512 load(const std::byte* row, size_t c) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
  static KVS_ALWAYS_INLINE __m512 load(const std::byte* row, size_t c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  }
};

struct LoadF16 {
  static constexpr size_t kDecodeRowTile = 1;
  static KVS_ALWAYS_INLINE __m512 load(const std::byte* row, size_t c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  }
  static KVS_ALWAYS_INLINE __m512 load(const std::byte* row, size_t c, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
  }
};

struct LoadBF16 {
  static constexpr size_t kDecodeRowTile = 1;
  static KVS_ALWAYS_INLINE __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static KVS_ALWAYS_INLINE __m512 load(const std::byte* row, size_t c) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  }
  static KVS_ALWAYS_INLINE __m512 load(const std::byte* row, size_t c, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * c));
  }
};

template <class L>
struct FloatKernel {
  static constexpr size_t kRowTile = 4;
  static constexpr size_t kDecodeRowTile = L::kDecodeRowTile;
  static constexpr size_t kMaxTokens = 6;    // 4 x 6 accumulators + 4 weight vectors of 32 registers
  static constexpr size_t kColChunk = 512;  // 6 tokens x 2 KiB of activations stay in L1

  const MatmulOperands& op;
  size_t row_stride;  // bytes

  template <size_t R, size_t T>
  void tile(size_t r0, size_t t0, size_t c0, size_t c1, bool first) const {
    const std::byte* w[R];
    const float* x[T];
    for (size_t i = 0; i < R; ++i) w[i] = op.w.data + (r0 + i) * row_stride;
    for (size_t j = 0; j < T; ++j) x[j] = op.x + (t0 + j) * op.w.cols;
    __m512 acc[T][R];
    for (size_t j = 0; j < T; ++j)
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_setzero_ps();
    size_t c = c0;
    if constexpr (R == 1 && T == 1) {  // decode: four accumulators for four independent FMA chains
      __m512 more[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (; c + 64 <= c1; c += 64) {
        acc[0][0] = _mm512_fmadd_ps(L::load(w[0], c), _mm512_loadu_ps(x[0] + c), acc[0][0]);
        for (size_t k = 0; k < 3; ++k)
          more[k] = _mm512_fmadd_ps(L::load(w[0], c + 16 * (k + 1)), _mm512_loadu_ps(x[0] + c + 16 * (k + 1)), more[k]);
      }
      acc[0][0] = _mm512_add_ps(_mm512_add_ps(acc[0][0], more[0]), _mm512_add_ps(more[1], more[2]));
    }
    for (; c + 16 <= c1; c += 16) {
      __m512 wv[R];
#pragma GCC unroll 16
      for (size_t i = 0; i < R; ++i) wv[i] = L::load(w[i], c);
#pragma GCC unroll 16
      for (size_t j = 0; j < T; ++j) {
        const __m512 xv = _mm512_loadu_ps(x[j] + c);
#pragma GCC unroll 16
        for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_fmadd_ps(wv[i], xv, acc[j][i]);
      }
    }
    if (c < c1) {
      const __mmask16 m = tail_mask16(c1 - c);
      __m512 wv[R];
      for (size_t i = 0; i < R; ++i) wv[i] = L::load(w[i], c, m);
      for (size_t j = 0; j < T; ++j) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + c);
        for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_fmadd_ps(wv[i], xv, acc[j][i]);
      }
    }
    for (size_t j = 0; j < T; ++j) store_row_sums<R>(acc[j], op.y + (t0 + j) * op.w.rows + r0, first);
  }
};

template <class L>
void run(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  tiling::run(FloatKernel<L>{op, op.w.row_bytes()}, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace

void matmul_f32_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<LoadF32>(op, row_begin, row_end);
}
void matmul_f16_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<LoadF16>(op, row_begin, row_end);
}
void matmul_bf16_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<LoadBF16>(op, row_begin, row_end);
}

}  // namespace kvs::detail
