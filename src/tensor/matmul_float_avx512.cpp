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
  using Vec = __m512;
  static constexpr size_t kStep = 16;
  static constexpr size_t kStripe = 8;  // 128 columns: 4 lines of 2-byte weights
  static constexpr size_t kChains = 2;
  static constexpr size_t kMaxRegisterChains = 16;
  static constexpr size_t kSegment = 1024;
  static constexpr size_t kRowTile = 4;
  static constexpr size_t kDecodeRowTile = L::kDecodeRowTile;
  static constexpr size_t kMaxTokens = 6;    // 4 x 6 accumulators + 4 weight vectors of 32 registers
  static constexpr size_t kColChunk = 1024;  // 6 tokens x 4 KiB of activations stay in L1

  const MatmulOperands& op;
  size_t row_stride;  // bytes

  template <size_t R, size_t T>
  struct Pointers {
    const std::byte* w[R];
    const float* x[T];
  };
  template <size_t R, size_t T>
  Pointers<R, T> pointers(size_t r0, size_t t0) const {
    Pointers<R, T> p;
    for (size_t i = 0; i < R; ++i) p.w[i] = op.w.data + (r0 + i) * row_stride;
    for (size_t j = 0; j < T; ++j) p.x[j] = op.x + (t0 + j) * op.w.cols;
    return p;
  }

  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const size_t c = n * kStep;
    __m512 wv[R];
#pragma GCC unroll 16
    for (size_t i = 0; i < R; ++i) wv[i] = L::load(p.w[i], c);
#pragma GCC unroll 16
    for (size_t j = 0; j < T; ++j) {
      const __m512 xv = _mm512_loadu_ps(p.x[j] + c);
#pragma GCC unroll 16
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_fmadd_ps(wv[i], xv, acc[j][i]);
    }
  }

  // The row's last columns: zero-filled lanes add +0 products.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void last_step(const Pointers<R, T>& p, size_t n, size_t c1, Vec (&acc)[T][R]) {
    const size_t c = n * kStep;
    const __mmask16 m = tail_mask16(c1 - c);
    __m512 wv[R];
    for (size_t i = 0; i < R; ++i) wv[i] = L::load(p.w[i], c, m);
    for (size_t j = 0; j < T; ++j) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, p.x[j] + c);
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_fmadd_ps(wv[i], xv, acc[j][i]);
    }
  }

  static KVS_ALWAYS_INLINE Vec zero() { return _mm512_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  template <size_t N>
  static KVS_ALWAYS_INLINE void reduce(const Vec* acc, float* sums) {
    reduce_sums<N>(acc, sums);
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
