// The float panel matmul (tensor/float_panels.h) for one ISA. Included only by matmul_panels_avx2.cpp /
// matmul_panels_avx512.cpp, each with its own vector operations in an anonymous namespace, so no code compiled for one
// ISA can be picked by the linker for another.
//
// An ISA's vector operations O provide:
//   Vec, kLanes (= G)             the accumulator vector: one fp32 lane per row of a panel
//   kTilePanels, kTileTokens      prefill's register tile: panels x tokens (kTileTokens divides kActivationTile)
//   load_f16(p), load_pairs(p)    a panel's column at p widened to fp32; a panel's column pair at p (integer vector)
//   even(v), odd(v)               a pair vector's columns c and c + 1 widened to fp32 (bf16: a shift, a mask)
//   broadcast(x), fmadd(a, b, c)  *x in every lane; a * b + c in one rounding
//   zero(), add(a, b), store(y, v, lanes)   (store writes lanes [0, lanes) of v to y)
// A weight format K (F16Panels<O>, Bf16Panels<O> below; the AVX-512 file adds vdpbf16ps) provides on top:
//   kCols                         columns per step: 1 (F16) or 2 (BF16 column pairs)
//   X                             the activations' element (float, or uint16_t bf16 for the dot-product path)
//   x_row(op)                     decode's token; x_tile(op, t0) prefill's tile from token t0 (a multiple of
//                                 kTileTokens), op.x_tiles or op.xb_tiles (float_panels.h)
//   step<P, T, S>(w, c, x, acc)   acc[j][p] (one Vec per panel p, token j) += panel p's columns [c, c + kCols) times
//                                 token j's: a fixed instruction sequence (c a multiple of kCols). Token j's column c
//                                 is x[c S + j] (floats) or its pair starts at x + c S + 2 j (bf16): S = 1 reads
//                                 decode's row, S = kActivationTile a tile
//   step_last<P, T, S>(...)       the same for an odd last column c alone (BF16 pairs; never called for kCols 1)
// The canonical sum (float_panels.h): chain k takes the stripes of kStripe columns with (c / kStripe) % 4 == k,
// y = (chain 0 + chain 1) + (chain 2 + chain 3). Decode runs the four chains in one pass over a panel; prefill runs
// a tile of P panels x T tokens chain after chain, each chain over the whole row.
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/status.h"
#include "tensor/float_panels.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace kvs::detail::panels {

inline constexpr size_t kChains = FloatPanelLayout::kChains;
inline constexpr size_t kStripe = FloatPanelLayout::kStripe;

template <class K>
struct Operands {
  const MatmulOperands& op;
  FloatPanelLayout layout;

  const uint16_t* panel(size_t g) const {
    return reinterpret_cast<const uint16_t*>(op.w.data + g * layout.group_bytes());
  }
  // Lanes of panel g that are rows of the matrix.
  size_t lanes(size_t g) const { return std::min(K::kLanes, layout.rows - g * K::kLanes); }
  float* y(size_t t, size_t g) const { return op.y + t * layout.rows + g * K::kLanes; }
};

// fp32 activations: decode's row, or prefill's tiles.
struct F32Activations {
  using X = float;
  static const float* x_row(const MatmulOperands& op) { return op.x; }
  static const float* x_tile(const MatmulOperands& op, size_t t0) { return op.x_tiles + x_tile_offset(t0, op.w.cols); }
};

// acc[j][p] += w[p] x token j's activation x_col[j] (x_col: one column's place in the activations, as step finds it).
template <class O, size_t P, size_t T>
KVS_ALWAYS_INLINE void column_fma(const typename O::Vec (&w)[P], const float* x_col, typename O::Vec (&acc)[T][P]) {
#pragma GCC unroll 8
  for (size_t j = 0; j < T; ++j) {
    const typename O::Vec xv = O::broadcast(x_col + j);
#pragma GCC unroll 4
    for (size_t p = 0; p < P; ++p) acc[j][p] = O::fmadd(w[p], xv, acc[j][p]);
  }
}

// F16 panels: a column a step, widened (vcvtph2ps), times each token's broadcast activation.
template <class O>
struct F16Panels : O, F32Activations {
  using Vec = typename O::Vec;
  static constexpr size_t kCols = 1;
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step(const uint16_t* const (&w)[P], size_t c, const float* x, Vec (&acc)[T][P]) {
    Vec wv[P];
#pragma GCC unroll 4
    for (size_t p = 0; p < P; ++p) wv[p] = O::load_f16(w[p] + c * O::kLanes);
    column_fma<O, P, T>(wv, x + c * S, acc);
  }
  template <size_t P, size_t T, size_t S>
  static void step_last(const uint16_t* const (&)[P], size_t, const float*, Vec (&)[T][P]) {}
};

// BF16 panels widened: a column pair a step, the even column for every token, then the odd one, each panel's pairs
// loaded again (from L1). The tile's accumulators, one widened column per panel and a broadcast fit the registers
// (AVX2: 12 + 2 + 1 of 16; AVX-512: 24 + 4 + 1 of 32), where both columns of every panel at once spilled (AVX2: 138
// against 147 GFLOP/s).
template <class O>
struct Bf16Panels : O, F32Activations {
  using Vec = typename O::Vec;
  static constexpr size_t kCols = 2;
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step(const uint16_t* const (&w)[P], size_t c, const float* x, Vec (&acc)[T][P]) {
#pragma GCC unroll 2
    for (size_t half = 0; half < 2; ++half) {
      Vec wv[P];
#pragma GCC unroll 4
      for (size_t p = 0; p < P; ++p) {
        const auto v = O::load_pairs(w[p] + c * O::kLanes);
        wv[p] = half == 0 ? O::even(v) : O::odd(v);
      }
      column_fma<O, P, T>(wv, x + (c + half) * S, acc);
    }
  }
  template <size_t P, size_t T, size_t S>
  static KVS_ALWAYS_INLINE void step_last(const uint16_t* const (&w)[P], size_t c, const float* x, Vec (&acc)[T][P]) {
    Vec wv[P];
    for (size_t p = 0; p < P; ++p) wv[p] = O::even(O::load_pairs(w[p] + c * O::kLanes));
    column_fma<O, P, T>(wv, x + c * S, acc);
  }
};

// Columns [c0, c1) of one chain's stripe into acc: whole steps, then an odd last column.
template <class K, size_t P, size_t T, size_t S>
KVS_ALWAYS_INLINE void stripe(const uint16_t* const (&w)[P], const typename K::X* x, size_t c0, size_t c1,
                              typename K::Vec (&acc)[T][P]) {
  if (c1 - c0 == kStripe) {
#pragma GCC unroll 16
    for (size_t u = 0; u < kStripe; u += K::kCols) K::template step<P, T, S>(w, c0 + u, x, acc);
    return;
  }
  size_t c = c0;
  for (; c + K::kCols <= c1; c += K::kCols) K::template step<P, T, S>(w, c, x, acc);
  if constexpr (K::kCols > 1) {
    if (c < c1) K::template step_last<P, T, S>(w, c, x, acc);
  }
}

// Decode: one panel, the four chains side by side over one sequential pass.
template <class K>
void decode_panel(const Operands<K>& o, size_t g) {
  using Vec = typename K::Vec;
  const size_t cols = o.layout.cols;
  const uint16_t* const w[1] = {o.panel(g)};
  const typename K::X* x = K::x_row(o.op);
  Vec acc[kChains][1][1];
  for (auto& a : acc) a[0][0] = K::zero();
  size_t s = 0;
  for (; s + kChains * kStripe <= cols; s += kChains * kStripe) {
    tiling::for_each_chain<kChains>(
        [&](auto k) { stripe<K, 1, 1, 1>(w, x, s + k * kStripe, s + (k + 1) * kStripe, acc[k]); });
  }
  for (; s < cols; s += kStripe) {  // the last stripes: fewer than one of each chain
    const size_t k = s / kStripe % kChains;
    stripe<K, 1, 1, 1>(w, x, s, std::min(s + kStripe, cols), acc[k]);
  }
  const Vec sum = K::add(K::add(acc[0][0][0], acc[1][0][0]), K::add(acc[2][0][0], acc[3][0][0]));
  K::store(o.y(0, g), sum, o.lanes(g));
}

// Prefill: panels [g, g + P) x tokens [t0, t0 + T), chain after chain over whole rows.
template <class K, size_t P, size_t T>
void tile(const Operands<K>& o, size_t g, size_t t0) {
  using Vec = typename K::Vec;
  const size_t cols = o.layout.cols;
  const uint16_t* w[P];
  for (size_t p = 0; p < P; ++p) w[p] = o.panel(g + p);
  const typename K::X* x = K::x_tile(o.op, t0);
  Vec done[kChains][T][P];  // the finished chains, parked
  for (size_t k = 0; k < kChains; ++k) {
    Vec acc[T][P];
    for (size_t j = 0; j < T; ++j)
      for (size_t p = 0; p < P; ++p) acc[j][p] = K::zero();
    for (size_t s = k * kStripe; s < cols; s += kChains * kStripe)
      stripe<K, P, T, kActivationTile>(w, x, s, std::min(s + kStripe, cols), acc);
    for (size_t j = 0; j < T; ++j)
      for (size_t p = 0; p < P; ++p) done[k][j][p] = acc[j][p];
  }
  for (size_t j = 0; j < T; ++j) {
    for (size_t p = 0; p < P; ++p) {
      const Vec sum = K::add(K::add(done[0][j][p], done[1][j][p]), K::add(done[2][j][p], done[3][j][p]));
      K::store(o.y(t0 + j, g + p), sum, o.lanes(g + p));
    }
  }
}

template <class K, size_t P, size_t... Ts>
void dispatch_tokens(const Operands<K>& o, size_t g, size_t t, size_t nt, std::index_sequence<Ts...>) {
  (void)((nt == Ts + 1 ? (tile<K, P, Ts + 1>(o, g, t), true) : false) || ...);
}

// Output rows [row_begin, row_end) for every token: row_begin a multiple of G, row_end too or the matrix's rows.
template <class K>
void run(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const FloatPanelLayout layout = FloatPanelLayout::of(op.w);
  static_assert(kActivationTile % K::kTileTokens == 0, "a token tile lies within one activation tile");
  KVS_ASSERT(layout.group_rows == K::kLanes && row_begin % K::kLanes == 0 &&
                 (row_end % K::kLanes == 0 || row_end == layout.rows),
             "panel matmul: panels of {} rows read by a kernel of {} lanes over rows [{}, {}) of {}", layout.group_rows,
             K::kLanes, row_begin, row_end, layout.rows);
  const Operands<K> o{op, layout};
  const size_t g_begin = row_begin / K::kLanes, g_end = (row_end + K::kLanes - 1) / K::kLanes;
  if (op.n_tokens == 1) {
    for (size_t g = g_begin; g < g_end; ++g) decode_panel<K>(o, g);
    return;
  }
  // Tiles of panels outer: their weights stay in L2 while every token tile passes over them.
  for (size_t g = g_begin; g < g_end; g += K::kTilePanels) {
    const bool whole = g + K::kTilePanels <= g_end;
    for (size_t t = 0; t < op.n_tokens; t += K::kTileTokens) {
      const size_t nt = std::min(K::kTileTokens, op.n_tokens - t);
      if (whole) {
        dispatch_tokens<K, K::kTilePanels>(o, g, t, nt, std::make_index_sequence<K::kTileTokens>{});
      } else {
        for (size_t gg = g; gg < g_end; ++gg)
          dispatch_tokens<K, 1>(o, gg, t, nt, std::make_index_sequence<K::kTileTokens>{});
      }
    }
  }
}

}  // namespace kvs::detail::panels
