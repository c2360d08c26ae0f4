// F16 and BF16 weights repacked at load into panels of G rows for the float matmul kernels (matmul_panels_*.cpp).
//
// Why: row-major, a kernel dots one row with one token at a time: every product lands in a lane of a vector that
// must be summed horizontally at the end, and each weight vector and each activation vector is loaded for a few
// products only (session 15's profile: 2-2.3 instructions per FMA, 36-62% of the FMA peak in prefill). In panels,
// one vector holds one column of G rows: a lane is a row, so a token's activation broadcast into a register
// multiplies G rows at once and the sums never cross lanes. A tile of P panels x T tokens keeps P T accumulators in
// registers and spends P weight loads and T broadcasts on P T FMAs, the shape of a BLAS micro-kernel (4 x 6 on
// AVX-512, 2 x 6 on AVX2).
//
// Layout (FloatPanelLayout): rows in groups (panels) of G = 16 (AVX-512: a zmm of fp32) or 8 (AVX2: a ymm); the
// last panel is padded with zero rows. A panel is one contiguous run of group_bytes() bytes:
//   F16:  column-major within the panel: element (i, c) of panel g (row gG + i) at halfword c G + i.
//   BF16: column pairs: element (i, c) at halfword (c / 2) 2G + 2 i + c % 2, so one load holds columns c and c + 1
//         of the G rows as the 32-bit pairs vdpbf16ps multiplies (and a shift and a mask widen to fp32); an odd
//         last column is paired with a zero column.
// The values are exactly the file's: unpacking gives the original rows back bit for bit.
//
// The canonical sum of these kernels (what makes them batch-invariant, matmul.h; and the same bits on AVX2 and
// AVX-512 wherever both multiply widened fp32 values, because a lane is one row on either): for row r and token t,
// chain k (0..3) is one fp32 accumulator that starts at +0 and takes fma(w[r][c], x[t][c], acc) for the columns
// c with (c / kStripe) % kChains == k, in increasing c; y = (chain 0 + chain 1) + (chain 2 + chain 3). With bf16
// dot products (vdpbf16ps) a chain takes a column pair per instruction, in the instruction's own order. Decode runs
// the four chains side by side in one sequential pass over a panel; prefill runs them one after another per tile.
//
// Prefill reads the activations tiled (tile_activations): tokens in tiles of kActivationTile, each tile column-major,
// so a tile's broadcasts come from one sequential stream. Read in place, the T token rows of a tile, cols floats
// apart (a multiple of 4 KiB for the usual widths), fell into the same L1 sets as each other and the panels and
// evicted each other: 37% of the FMA peak on AVX-512 (12 tokens and 2 panels: 14 streams for 12 ways).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "tensor/weight_view.h"

namespace kvs {

struct FloatPanelLayout {
  static constexpr size_t kChains = 4;   // independent accumulators per (row, token)
  static constexpr size_t kStripe = 16;  // consecutive columns a chain takes before the next chain's turn

  DType type = DType::kF16;  // kF16 or kBF16
  size_t group_rows = 16;    // G: 8 or 16
  size_t rows = 0;
  size_t cols = 0;

  static FloatPanelLayout of(const WeightView& w);  // w.layout packed, w.type F16 or BF16

  // Columns as stored: BF16 pads an odd count with a zero column.
  size_t stored_cols() const;
  size_t groups() const { return (rows + group_rows - 1) / group_rows; }
  size_t group_bytes() const { return stored_cols() * group_rows * 2; }
  size_t bytes() const { return groups() * group_bytes(); }
  // Halfword index of element (i, c) within its panel.
  size_t element(size_t i, size_t c) const {
    return type == DType::kBF16 ? c / 2 * 2 * group_rows + 2 * i + c % 2 : c * group_rows + i;
  }
};

// Tokens per activation tile: a multiple of every kernel tile's tokens (6 on AVX-512 and on AVX2).
inline constexpr size_t kActivationTile = 6;

// Columns of bf16 column pairs: cols rounded up to even (the pad column 0).
inline size_t bf16_pair_cols(size_t cols) { return (cols + 1) / 2 * 2; }

// x [n_tokens][cols] in tiles: tile i holds tokens [6 i, 6 i + 6), element (j, c) at float c * 6 + j of the tile
// (cols * 6 floats). The slots of the last tile's missing tokens are left as they were. With a pool, its threads
// take tiles side by side.
void tile_activations(const float* x, size_t n_tokens, size_t cols, AlignedBuffer<float>& out,
                      ThreadPool* pool = nullptr);
// Where token t's column 0 sits in tile_activations' output.
inline size_t x_tile_offset(size_t t, size_t cols) {
  return t / kActivationTile * cols * kActivationTile + t % kActivationTile;
}
// bf16 activations [n_tokens][cols] in tiles of column pairs: element (j, c) at halfword (c - c % 2) 6 + 2 j + c % 2
// of its tile (bf16_pair_cols(cols) columns, the pad column 0).
void tile_activations_bf16(const uint16_t* xb, size_t n_tokens, size_t cols, AlignedBuffer<uint16_t>& out,
                           ThreadPool* pool = nullptr);
// Where token t's column 0 sits in tile_activations_bf16's output.
inline size_t xb_tile_offset(size_t t, size_t cols) {
  return t / kActivationTile * bf16_pair_cols(cols) * kActivationTile + 2 * (t % kActivationTile);
}

// Whether `type` is packed in panels (F16, BF16), and whether w is.
inline bool float_panel_type(DType type) { return type == DType::kF16 || type == DType::kBF16; }
inline bool in_float_panels(const WeightView& w) { return is_packed(w.layout) && float_panel_type(w.type); }

// Writes panels [g_begin, g_end) of the row-major F16/BF16 matrix w into `out` (p.bytes() long, zero-filled).
void pack_float_panels(const WeightView& w, const FloatPanelLayout& p, size_t g_begin, size_t g_end, std::byte* out);

// Row r of a panel-packed matrix back in row-major halfwords (cols * 2 bytes).
void unpack_float_panel_row(const WeightView& packed, size_t r, std::byte* out);

}  // namespace kvs
