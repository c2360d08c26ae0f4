// AVX-512 matmul over F16 and BF16 weights packed in panels of 16 rows (tensor/float_panels.h,
// panel_matmul_impl.h): a zmm holds one column of a panel, a lane per row. F16 columns widen with vcvtph2ps, BF16
// pairs with a shift and a mask (exact fp32 x fp32 FMAs, the same bits as the AVX2 kernel); on CPUs with
// AVX512_BF16 the BF16 pairs go to vdpbf16ps with the activations rounded to bf16 (twice the FMA rate).
// Prefill tiles: 4 panels x 6 tokens, 24 accumulators of the 32 registers (2 panels x 12 tokens ran at 69% of the
// FMA peak, 4 x 6 at 82%: fewer broadcasts a column).
#include <cstring>

#include "tensor/panel_matmul_impl.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

struct Avx512Ops {
  using Vec = __m512;
  static constexpr size_t kLanes = 16;
  static constexpr size_t kTilePanels = 4;
  static constexpr size_t kTileTokens = 6;
  static KVS_ALWAYS_INLINE Vec load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static KVS_ALWAYS_INLINE __m512i load_pairs(const uint16_t* p) { return _mm512_load_si512(p); }
  static KVS_ALWAYS_INLINE Vec even(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
  static KVS_ALWAYS_INLINE Vec odd(__m512i v) {
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static KVS_ALWAYS_INLINE Vec broadcast(const float* x) { return _mm512_set1_ps(*x); }
  static KVS_ALWAYS_INLINE Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static KVS_ALWAYS_INLINE Vec zero() { return _mm512_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static KVS_ALWAYS_INLINE void store(float* y, Vec v, size_t lanes) {
    if (lanes == kLanes) {
      _mm512_storeu_ps(y, v);
    } else {
      _mm512_mask_storeu_ps(y, tail_mask16(lanes), v);
    }
  }
};

// BF16 pairs by vdpbf16ps: both columns' products in one instruction against the token's bf16 pair.
struct Bf16DotPanels : Avx512Ops {
  using X = uint16_t;
  static constexpr size_t kCols = 2;
  static const uint16_t* x_row(const MatmulOperands& op) { return op.xb->token(0); }
  static const uint16_t* x_tile(const MatmulOperands& op, size_t t0) {
    return op.xb_tiles + xb_tile_offset(t0, op.w.cols);
  }
  static KVS_ALWAYS_INLINE __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }
  static KVS_ALWAYS_INLINE __m512bh pair_of(const uint16_t* x) {
    int32_t two;
    std::memcpy(&two, x, 4);
    return as_bh(_mm512_set1_epi32(two));
  }
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step(const uint16_t* const (&w)[P], size_t c, const uint16_t* x, Vec (&acc)[T][P]) {
    __m512bh wv[P];
#pragma GCC unroll 4
    for (size_t p = 0; p < P; ++p) wv[p] = as_bh(_mm512_load_si512(w[p] + c * kLanes));
#pragma GCC unroll 16
    for (size_t j = 0; j < T; ++j) {
      const __m512bh xv = pair_of(x + c * S + 2 * j);
#pragma GCC unroll 4
      for (size_t p = 0; p < P; ++p) acc[j][p] = _mm512_dpbf16_ps(acc[j][p], wv[p], xv);
    }
  }
  // The odd last column: its pair's second halfword is 0 in the panel and in the broadcast activation.
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step_last(const uint16_t* const (&w)[P], size_t c, const uint16_t* x,
                                          Vec (&acc)[T][P]) {
    for (size_t j = 0; j < T; ++j) {
      const __m512bh xv = as_bh(_mm512_set1_epi32(x[c * S + 2 * j]));
      for (size_t p = 0; p < P; ++p)
        acc[j][p] = _mm512_dpbf16_ps(acc[j][p], as_bh(_mm512_load_si512(w[p] + c * kLanes)), xv);
    }
  }
};

}  // namespace

void matmul_f16_panels_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<panels::F16Panels<Avx512Ops>>(op, row_begin, row_end);
}
void matmul_bf16_panels_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<panels::Bf16Panels<Avx512Ops>>(op, row_begin, row_end);
}
void matmul_bf16dot_panels_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<Bf16DotPanels>(op, row_begin, row_end);
}

}  // namespace kvs::detail
