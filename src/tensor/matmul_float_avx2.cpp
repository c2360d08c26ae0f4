// AVX2 matmul for F32, F16 and BF16 weights with fp32 activations (exact inputs, fp32 FMA).
// Weights are widened to fp32 in registers; each widened vector feeds T tokens (see matmul_tiling.h).
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx2;

// 8 weights at element c of a row, widened to fp32, and one weight (the column tail).
// kDecodeRowTile: rows streamed at once in decode, the fastest from DRAM as measured (Zen 5): one
// sequential stream for 2-byte weights, eight for fp32.
struct LoadF32 {
  static constexpr size_t kDecodeRowTile = 8;
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
  static KVS_ALWAYS_INLINE float one(const std::byte* row, size_t c) { return reinterpret_cast<const float*>(row)[c]; }
};

struct LoadF16 {
  static constexpr size_t kDecodeRowTile = 1;
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  }
  static KVS_ALWAYS_INLINE float one(const std::byte* row, size_t c) {
    return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[c]);
  }
};

struct LoadBF16 {
  static constexpr size_t kDecodeRowTile = 1;
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static KVS_ALWAYS_INLINE float one(const std::byte* row, size_t c) {
    const uint32_t bits = uint32_t{reinterpret_cast<const uint16_t*>(row)[c]} << 16;
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits))));
  }
};

template <class L>
struct FloatKernel {
  static constexpr size_t kRowTile = 4;
  static constexpr size_t kDecodeRowTile = L::kDecodeRowTile;
  static constexpr size_t kMaxTokens = 3;    // 4 x 3 accumulators + 4 weight vectors of 16 registers
  static constexpr size_t kColChunk = 1024;  // 3 tokens x 4 KiB of activations stay in L1

  const MatmulOperands& op;
  size_t row_stride;  // bytes

  template <size_t R, size_t T>
  void tile(size_t r0, size_t t0, size_t c0, size_t c1, bool first) const {
    const std::byte* w[R];
    const float* x[T];
    for (size_t i = 0; i < R; ++i) w[i] = op.w.data + (r0 + i) * row_stride;
    for (size_t j = 0; j < T; ++j) x[j] = op.x + (t0 + j) * op.w.cols;
    __m256 acc[T][R];
    for (size_t j = 0; j < T; ++j)
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm256_setzero_ps();
    size_t c = c0;
    if constexpr (R == 1 && T == 1) {  // decode: four accumulators for four independent FMA chains
      __m256 more[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (; c + 32 <= c1; c += 32) {
        acc[0][0] = _mm256_fmadd_ps(L::load(w[0], c), _mm256_loadu_ps(x[0] + c), acc[0][0]);
        for (size_t k = 0; k < 3; ++k)
          more[k] = _mm256_fmadd_ps(L::load(w[0], c + 8 * (k + 1)), _mm256_loadu_ps(x[0] + c + 8 * (k + 1)), more[k]);
      }
      acc[0][0] = _mm256_add_ps(_mm256_add_ps(acc[0][0], more[0]), _mm256_add_ps(more[1], more[2]));
    }
    for (; c + 8 <= c1; c += 8) {
      __m256 wv[R];
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) wv[i] = L::load(w[i], c);
#pragma GCC unroll 8
      for (size_t j = 0; j < T; ++j) {
        const __m256 xv = _mm256_loadu_ps(x[j] + c);
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) acc[j][i] = _mm256_fmadd_ps(wv[i], xv, acc[j][i]);
      }
    }
    for (size_t j = 0; j < T; ++j) {
      float sums[R];
      row_sums<R>(acc[j], sums);
      for (size_t i = 0; i < R; ++i) {
        for (size_t k = c; k < c1; ++k) sums[i] += L::one(w[i], k) * x[j][k];  // column tail (< 8)
        float& y = op.y[(t0 + j) * op.w.rows + r0 + i];
        y = first ? sums[i] : y + sums[i];
      }
    }
  }
};

template <class L>
void run(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  tiling::run(FloatKernel<L>{op, op.w.row_bytes()}, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace

void matmul_f32_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<LoadF32>(op, row_begin, row_end);
}
void matmul_f16_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<LoadF16>(op, row_begin, row_end);
}
void matmul_bf16_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<LoadBF16>(op, row_begin, row_end);
}

}  // namespace kvs::detail
