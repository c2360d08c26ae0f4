// Cache blocking shared by the SIMD matmul kernels. Included only by *_avx2.cpp / *_avx512.cpp files;
// every instantiation is specific to its (ISA-namespaced) Kernel type, so no code compiled for one ISA
// can be picked by the linker for another.
//
// A Kernel computes y[t][r] (+)= sum_{c in [c0, c1)} w[r][c] * x[t][c] for a tile of R rows x T tokens,
// holding R * T accumulators in registers: each weight vector it loads is reused T times, each activation
// vector R times. It provides:
//   kRowTile, kDecodeRowTile  rows per tile in prefill / decode (powers of two)
//   kMaxTokens                tokens per tile (every T in [1, kMaxTokens] is instantiated)
//   kColChunk                 columns per chunk in prefill (a multiple of the kernel's column step)
//   template <size_t R, size_t T> void tile(size_t r, size_t t, size_t c0, size_t c1, bool first) const
//     first: store into y (else add to y).
#pragma once

#include <cstddef>
#include <utility>

namespace kvs::tiling {

// Rows of one block: their weights over one column chunk stay in L2 while every token tile streams by.
inline constexpr size_t kRowBlock = 64;

template <class K, size_t R, size_t... Ts>
inline void dispatch_tokens(const K& k, size_t nt, size_t r, size_t t, size_t c0, size_t c1, bool first,
                            std::index_sequence<Ts...>) {
  (void)((nt == Ts + 1 ? (k.template tile<R, Ts + 1>(r, t, c0, c1, first), true) : false) || ...);
}

// Rows [r, r_end) for one token tile: as many full R-row tiles as fit, then halves down to 1 row.
template <class K, size_t R>
inline void rows_for_tokens(const K& k, size_t r, size_t r_end, size_t t, size_t nt, size_t c0, size_t c1,
                            bool first) {
  for (; r + R <= r_end; r += R)
    dispatch_tokens<K, R>(k, nt, r, t, c0, c1, first, std::make_index_sequence<K::kMaxTokens>{});
  if constexpr (R > 1) {
    if (r < r_end) rows_for_tokens<K, R / 2>(k, r, r_end, t, nt, c0, c1, first);
  }
}

// Output rows [row_begin, row_end) for all n_tokens tokens over cols columns.
template <class K>
void run(const K& k, size_t row_begin, size_t row_end, size_t n_tokens, size_t cols) {
  if (n_tokens == 1) {  // decode: stream each weight row once, no column chunks
    rows_for_tokens<K, K::kDecodeRowTile>(k, row_begin, row_end, 0, 1, 0, cols, true);
    return;
  }
  for (size_t rb = row_begin; rb < row_end; rb += kRowBlock) {
    const size_t rb_end = rb + kRowBlock < row_end ? rb + kRowBlock : row_end;
    for (size_t c0 = 0; c0 < cols; c0 += K::kColChunk) {
      const size_t c1 = c0 + K::kColChunk < cols ? c0 + K::kColChunk : cols;
      // The token tile's activations over [c0, c1) stay in L1 while the block's row tiles pass.
      for (size_t t = 0; t < n_tokens; t += K::kMaxTokens) {
        const size_t nt = n_tokens - t < K::kMaxTokens ? n_tokens - t : K::kMaxTokens;
        rows_for_tokens<K, K::kRowTile>(k, rb, rb_end, t, nt, c0, c1, c0 == 0);
      }
    }
  }
}

}  // namespace kvs::tiling
