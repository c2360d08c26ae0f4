#include "tensor/float_panels.h"

#include <algorithm>
#include <cstring>

#include "core/status.h"

namespace kvs {

FloatPanelLayout FloatPanelLayout::of(const WeightView& w) {
  KVS_ASSERT(in_float_panels(w), "FloatPanelLayout::of: {} weights in layout {} are not float panels",
             dtype_name(w.type), weight_layout_name(w.layout));
  return {.type = w.type,
          .group_rows = w.layout == WeightLayout::kPackedX16 ? size_t{16} : size_t{8},
          .rows = w.rows,
          .cols = w.cols};
}

namespace {

// One whole panel: G rows from `first` (`stride` halfwords apart) into `panel`, column by column, so the panel is
// written in order and the G rows are read side by side. Element (i, c) sits at c G + i (F16) or
// (c - c % 2) G + 2 i + c % 2 (BF16): G and the format as constants let the compiler unroll the rows.
template <size_t G, bool kBf16>
void pack_whole_panel(const uint16_t* first, size_t stride, size_t cols, uint16_t* panel) {
  const uint16_t* rows[G];
  for (size_t i = 0; i < G; ++i) rows[i] = first + i * stride;
  for (size_t c = 0; c < cols; ++c) {
    uint16_t* out = panel + (kBf16 ? (c - c % 2) * G + c % 2 : c * G);
#pragma GCC unroll 16
    for (size_t i = 0; i < G; ++i) out[i * (kBf16 ? 2 : 1)] = rows[i][c];
  }
}

}  // namespace

size_t FloatPanelLayout::stored_cols() const { return type == DType::kBF16 ? bf16_pair_cols(cols) : cols; }

void pack_float_panels(const WeightView& w, const FloatPanelLayout& p, size_t g_begin, size_t g_end, std::byte* out) {
  const bool bf16 = p.type == DType::kBF16;
  const size_t stride = w.row_bytes() / 2;
  for (size_t g = g_begin; g < g_end; ++g) {
    auto* panel = reinterpret_cast<uint16_t*>(out + g * p.group_bytes());
    const auto* first = reinterpret_cast<const uint16_t*>(w.row(g * p.group_rows));
    const size_t present = std::min(p.group_rows, p.rows - g * p.group_rows);  // the rest stay zero rows
    if (present == 16) {
      bf16 ? pack_whole_panel<16, true>(first, stride, p.cols, panel)
           : pack_whole_panel<16, false>(first, stride, p.cols, panel);
    } else if (present == 8 && p.group_rows == 8) {
      bf16 ? pack_whole_panel<8, true>(first, stride, p.cols, panel)
           : pack_whole_panel<8, false>(first, stride, p.cols, panel);
    } else {  // the last, partial panel
      for (size_t c = 0; c < p.cols; ++c)
        for (size_t i = 0; i < present; ++i) panel[p.element(i, c)] = first[i * stride + c];
    }
  }
}

namespace {

// Tokens of x [n_tokens][cols] into tiles of kActivationTile tokens, tile_elems elements a tile: token t's column c at
// out[first(t) + column(c)], columns [cols, stored_cols) zeros. With a pool, its threads take tiles side by side.
template <class T, class First, class Column>
void tile_tokens(const T* x, size_t n_tokens, size_t cols, size_t stored_cols, AlignedBuffer<T>& out, ThreadPool* pool,
                 First first, Column column) {
  const size_t tile_elems = stored_cols * kActivationTile;
  const size_t tiles = (n_tokens + kActivationTile - 1) / kActivationTile;
  if (out.size() < tiles * tile_elems) out = AlignedBuffer<T>(tiles * tile_elems);
  const auto tile_range = [&](size_t begin, size_t end) {
    for (size_t t = begin * kActivationTile; t < std::min(n_tokens, end * kActivationTile); ++t) {
      T* tile = out.data() + first(t);
      const T* row = x + t * cols;
      for (size_t c = 0; c < cols; ++c) tile[column(c)] = row[c];
      for (size_t c = cols; c < stored_cols; ++c) tile[column(c)] = T{};
    }
  };
  if (pool) {
    pool->parallel_for(tiles, 1, tile_range);
  } else {
    tile_range(0, tiles);
  }
}

}  // namespace

void tile_activations(const float* x, size_t n_tokens, size_t cols, AlignedBuffer<float>& out, ThreadPool* pool) {
  tile_tokens(
      x, n_tokens, cols, cols, out, pool, [cols](size_t t) { return x_tile_offset(t, cols); },
      [](size_t c) { return c * kActivationTile; });
}

void tile_activations_bf16(const uint16_t* xb, size_t n_tokens, size_t cols, AlignedBuffer<uint16_t>& out,
                           ThreadPool* pool) {
  tile_tokens(
      xb, n_tokens, cols, bf16_pair_cols(cols), out, pool, [cols](size_t t) { return xb_tile_offset(t, cols); },
      [](size_t c) { return (c - c % 2) * kActivationTile + c % 2; });
}

void unpack_float_panel_row(const WeightView& packed, size_t r, std::byte* out) {
  const FloatPanelLayout p = FloatPanelLayout::of(packed);
  KVS_ASSERT(r < p.rows, "unpack_float_panel_row: row {} of {}", r, p.rows);
  const auto* panel = reinterpret_cast<const uint16_t*>(packed.data + r / p.group_rows * p.group_bytes());
  for (size_t c = 0; c < p.cols; ++c) std::memcpy(out + 2 * c, panel + p.element(r % p.group_rows, c), 2);
}

}  // namespace kvs
