// AVX2 matmul over F16 and BF16 weights packed in panels of 8 rows (tensor/float_panels.h,
// panel_matmul_impl.h): a ymm holds one column of a panel, a lane per row. F16 columns widen with vcvtph2ps, BF16
// pairs with a shift and a mask; exact fp32 x fp32 FMAs, the same bits as the AVX-512 kernel's widened paths.
// Prefill tiles: 2 panels x 6 tokens, 12 accumulators, 2 weight vectors and a broadcast of the 16 registers.
#include "tensor/panel_matmul_impl.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

struct Avx2Common {
  using Vec = __m256;
  using X = float;
  static constexpr size_t kLanes = 8;
  static constexpr size_t kTilePanels = 2;
  static constexpr size_t kTileTokens = 6;
  static const float* x_row(const MatmulOperands& op) { return op.x; }
  static const float* x_tile(const MatmulOperands& op, size_t t0) {
    return op.x_tiles + t0 / kActivationTile * op.w.cols * kActivationTile + t0 % kActivationTile;
  }
  static KVS_ALWAYS_INLINE Vec zero() { return _mm256_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static KVS_ALWAYS_INLINE void store(float* y, Vec v, size_t lanes) {
    if (lanes == kLanes) {
      _mm256_storeu_ps(y, v);
      return;
    }
    alignas(32) float all[kLanes];
    _mm256_store_ps(all, v);
    for (size_t i = 0; i < lanes; ++i) y[i] = all[i];
  }
};

struct F16Panels : Avx2Common {
  static constexpr size_t kCols = 1;
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step(const uint16_t* const (&w)[P], size_t c, const float* x, Vec (&acc)[T][P]) {
    Vec wv[P];
#pragma GCC unroll 4
    for (size_t p = 0; p < P; ++p)
      wv[p] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(w[p] + c * kLanes)));
#pragma GCC unroll 8
    for (size_t j = 0; j < T; ++j) {
      const Vec xv = _mm256_broadcast_ss(x + c * S + j);
#pragma GCC unroll 4
      for (size_t p = 0; p < P; ++p) acc[j][p] = _mm256_fmadd_ps(wv[p], xv, acc[j][p]);
    }
  }
  template <size_t P, size_t T, size_t S>
  static void step_last(const uint16_t* const (&)[P], size_t, const float*, Vec (&)[T][P]) {}
};

// BF16 pairs widened: the low halfword of a 32-bit pair is column c, the high one column c + 1.
struct Bf16Panels : Avx2Common {
  static constexpr size_t kCols = 2;
  static KVS_ALWAYS_INLINE __m256i pairs(const uint16_t* panel, size_t c) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + c * kLanes));
  }
  static KVS_ALWAYS_INLINE Vec even(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
  static KVS_ALWAYS_INLINE Vec odd(__m256i v) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step(const uint16_t* const (&w)[P], size_t c, const float* x, Vec (&acc)[T][P]) {
    // The even column for every token, then the odd one, each panel's pairs loaded again (from L1): the 12
    // accumulators, a panel's widened column for each of 2 panels and a broadcast fit the 16 registers, where both
    // columns of both panels at once spilled.
#pragma GCC unroll 2
    for (size_t half = 0; half < 2; ++half) {
      Vec wv[P];
#pragma GCC unroll 4
      for (size_t p = 0; p < P; ++p) wv[p] = half == 0 ? even(pairs(w[p], c)) : odd(pairs(w[p], c));
#pragma GCC unroll 8
      for (size_t j = 0; j < T; ++j) {
        const Vec xv = _mm256_broadcast_ss(x + (c + half) * S + j);
#pragma GCC unroll 4
        for (size_t p = 0; p < P; ++p) acc[j][p] = _mm256_fmadd_ps(wv[p], xv, acc[j][p]);
      }
    }
  }

  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step_last(const uint16_t* const (&w)[P], size_t c, const float* x, Vec (&acc)[T][P]) {
    for (size_t j = 0; j < T; ++j)
      for (size_t p = 0; p < P; ++p)
        acc[j][p] = _mm256_fmadd_ps(even(pairs(w[p], c)), _mm256_broadcast_ss(x + c * S + j), acc[j][p]);
  }
};

}  // namespace

void matmul_f16_panels_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<F16Panels>(op, row_begin, row_end);
}
void matmul_bf16_panels_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<Bf16Panels>(op, row_begin, row_end);
}

}  // namespace kvs::detail
