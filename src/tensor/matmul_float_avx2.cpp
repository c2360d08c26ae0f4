// AVX2 matmul for F32, F16 and BF16 weights with fp32 activations (exact inputs, fp32 FMA).
// Weights are widened to fp32 in registers; each widened vector feeds T tokens (see matmul_tiling.h).
#include <cstring>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx2;

// 8 weights at element c of a row, widened to fp32; the partial form loads n < 8 and zero-fills the rest.
// kDecodeRowTile: rows streamed at once in decode, the fastest from DRAM as measured (Zen 5): one
// sequential stream for 2-byte weights, several for fp32. kChains x kDecodeRowTile accumulators (at most 8
// of the 16 registers) hide the FMA latency in decode; kStripe: the fastest in prefill as measured.
struct LoadF32 {
  static constexpr size_t kDecodeRowTile = 4;
  static constexpr size_t kChains = 2;  // x 4 rows: 8 accumulators in decode
  static constexpr size_t kStripe = 8;  // 64 columns: four lines of weights
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c, size_t n) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + c, tail_mask8(n));
  }
};

// The first n (< 8) 2-byte values at p, zero-filled to 8.
KVS_ALWAYS_INLINE __m128i load_u16_partial(const std::byte* p, size_t n) {
  alignas(16) uint16_t v[8] = {};
  std::memcpy(v, p, 2 * n);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(v));
}

struct LoadF16 {
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kChains = 4;
  static constexpr size_t kStripe = 4;  // 32 columns: one line of weights
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  }
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c, size_t n) {
    return _mm256_cvtph_ps(load_u16_partial(row + 2 * c, n));
  }
};

struct LoadBF16 {
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kChains = 4;
  static constexpr size_t kStripe = 4;  // 32 columns: one line of weights
  static KVS_ALWAYS_INLINE __m256 widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  }
  static KVS_ALWAYS_INLINE __m256 load(const std::byte* row, size_t c, size_t n) {
    return widen(load_u16_partial(row + 2 * c, n));
  }
};

template <class L>
struct FloatKernel {
  using Vec = __m256;
  static constexpr size_t kStep = 8;
  static constexpr size_t kStripe = L::kStripe;
  static constexpr size_t kChains = L::kChains;
  static constexpr size_t kMaxRegisterChains = 8;
  static constexpr size_t kSegment = 1024;
  static constexpr size_t kRowTile = 4;
  static constexpr size_t kDecodeRowTile = L::kDecodeRowTile;
  static constexpr size_t kMaxTokens = 3;    // 4 x 3 accumulators + 4 weight vectors of 16 registers
  static constexpr size_t kColChunk = 1024;  // 3 tokens x 4 KiB of activations stay in L1

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
    __m256 wv[R];
#pragma GCC unroll 8
    for (size_t i = 0; i < R; ++i) wv[i] = L::load(p.w[i], c);
#pragma GCC unroll 8
    for (size_t j = 0; j < T; ++j) {
      const __m256 xv = _mm256_loadu_ps(p.x[j] + c);
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm256_fmadd_ps(wv[i], xv, acc[j][i]);
    }
  }

  // The row's last columns: zero-filled lanes add +0 products.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void last_step(const Pointers<R, T>& p, size_t n, size_t c1, Vec (&acc)[T][R]) {
    const size_t c = n * kStep;
    __m256 wv[R];
    for (size_t i = 0; i < R; ++i) wv[i] = L::load(p.w[i], c, c1 - c);
    for (size_t j = 0; j < T; ++j) {
      const __m256 xv = _mm256_maskload_ps(p.x[j] + c, tail_mask8(c1 - c));
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm256_fmadd_ps(wv[i], xv, acc[j][i]);
    }
  }

  static KVS_ALWAYS_INLINE Vec zero() { return _mm256_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
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
