// Cache blocking and the canonical reduction order shared by the SIMD matmul kernels. Included only by
// *_avx2.cpp / *_avx512.cpp files; every instantiation is specific to its (ISA-namespaced) Kernel type, so
// no code compiled for one ISA can be picked by the linker for another.
//
// Canonical order: what makes matmul batch-invariant (see matmul.h). For one Kernel and one (row, token):
//   - the columns are cut into segments [s, s + kSegment) from s = 0 (the last one may be shorter);
//   - a segment is a run of steps of kStep columns (the last one may be partial); step v of the segment
//     goes to chain (v / kStripe) % kChains. Each chain is one accumulator vector that starts at zero and
//     takes its steps in column order (K::step / K::last_step: the same instructions for every tile shape);
//   - the segment's sum is reduce(c0 + c1) for two chains, reduce((c0 + c1) + (c2 + c3)) for four, with a
//     fixed horizontal tree (reduce_sums in simd_avx2.h / simd_avx512.h: one vector's sum never depends on
//     the vectors reduced beside it);
//   - y = sum of segment 0, then y = y + sum of segment g, in segment order (add_segment).
// Nothing else varies with the batch: register tiles (R rows x T tokens), column chunks and thread splits
// only decide which of these chains run side by side. Several chains let decode (one token) read each row
// in a single sequential stream, which the hardware prefetchers need (streams from several places of a row
// or several rows were 30-80% slower, Zen 5), with independent FMA chains in flight; tiles of several tokens
// run the chains one after another (the registers hold R x T accumulators, not kChains times that),
// parking the finished ones in memory.
//
// A Kernel provides:
//   Vec                       its accumulator vector type; zero(), add(a, b), reduce<N>(const Vec*, float*)
//   kStep, kStripe, kChains   columns per step, steps per stripe, chains (2 or 4)
//   kSegment                  columns per segment (a multiple of kStep)
//   kMaxRegisterChains        R x kChains accumulators up to this run side by side in registers (T == 1)
//   kRowTile, kDecodeRowTile  rows per tile in prefill / decode (powers of two)
//   kMaxTokens                tokens per tile (every T in [1, kMaxTokens] is instantiated)
//   kColChunk                 columns per cache block in prefill (a multiple of kSegment)
//   Pointers<R, T>, pointers<R, T>(r0, t0)      what step needs to reach rows r0.. and tokens t0..
//   step<R, T>(p, n, acc)          acc[j][i] += row i . token j over step n: columns [n, n + 1) * kStep
//   last_step<R, T>(p, n, c1, acc) the same over a partial last step [n * kStep, c1), c1 < (n + 1) * kStep
//                                  (steps are numbered from column 0: a kernel's addresses are linear in n)
//   op                        the MatmulOperands (for y and its shape)
#pragma once

#include <cstddef>
#include <utility>

#define KVS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvs::tiling {

// Rows of one block: their weights over one column chunk stay in L2 while every token tile streams by.
inline constexpr size_t kRowBlock = 64;

// y after the segment starting at column s, whose reduced sum is `sum`: the first segment stores.
inline void add_segment(float& y, float sum, size_t s) { y = s == 0 ? sum : y + sum; }

template <class K, size_t R, size_t T>
using Acc = typename K::Vec[T][R];

template <class K, size_t R, size_t T>
KVS_ALWAYS_INLINE void zero(Acc<K, R, T>& acc) {
  for (size_t j = 0; j < T; ++j)
    for (size_t i = 0; i < R; ++i) acc[j][i] = K::zero();
}

// f(std::integral_constant<size_t, k>{}) for k in [0, N): chain indices stay compile-time constants, so
// the chains' accumulator arrays stay in registers.
template <class F, size_t... ks>
KVS_ALWAYS_INLINE void for_each_index(const F& f, std::index_sequence<ks...>) {
  (f(std::integral_constant<size_t, ks>{}), ...);
}
template <size_t N, class F>
KVS_ALWAYS_INLINE void for_each_chain(const F& f) {
  for_each_index(f, std::make_index_sequence<N>{});
}

// Chain `chain` of the segment's full steps [n0, n0 + n_full): its stripes in order.
template <class K, size_t R, size_t T, class P>
KVS_ALWAYS_INLINE void chain_steps(const P& p, size_t n0, size_t n_full, size_t chain, Acc<K, R, T>& acc) {
  size_t v = chain * K::kStripe;
  for (; v + K::kStripe <= n_full; v += K::kChains * K::kStripe) {
#pragma GCC unroll 8
    for (size_t u = 0; u < K::kStripe; ++u) K::template step<R, T>(p, n0 + v + u, acc);
  }
  if constexpr (K::kStripe > 1) {  // a shorter last stripe
    for (; v < n_full; ++v) K::template step<R, T>(p, n0 + v, acc);
  }
}

// sum = the combined chains of the segment [s, s1). (The chains are locals: accumulating straight into
// `sum` made GCC store it to memory on every step.)
template <class K, size_t R, size_t T, class P>
KVS_ALWAYS_INLINE void segment(const P& p, size_t s, size_t s1, Acc<K, R, T>& sum) {
  constexpr size_t kChains = K::kChains, kGroup = kChains * K::kStripe;
  static_assert(kChains == 2 || kChains == 4, "the combining tree is written for 2 or 4 chains");
  const size_t n0 = s / K::kStep, n_full = (s1 - s) / K::kStep;
  const bool partial = s + n_full * K::kStep < s1;
  const size_t last_chain = (n_full / K::kStripe) % kChains;  // the chain of the partial step
  Acc<K, R, T> c[kChains];
  for (size_t k = 0; k < kChains; ++k) zero<K, R, T>(c[k]);
  if constexpr (T == 1 && R * kChains <= K::kMaxRegisterChains) {  // one sequential pass over the row(s)
    size_t v = 0;
    for (; v + kGroup <= n_full; v += kGroup) {
      for_each_chain<kChains>([&](auto k) {
#pragma GCC unroll 8
        for (size_t u = 0; u < K::kStripe; ++u) K::template step<R, T>(p, n0 + v + k * K::kStripe + u, c[k]);
      });
    }
    for (; v < n_full; ++v) {  // shorter stripes at the end
      const size_t chain = (v / K::kStripe) % kChains;
      for_each_chain<kChains>([&](auto k) {
        if (chain == k) K::template step<R, T>(p, n0 + v, c[k]);
      });
    }
  } else {  // R x T accumulators: one chain after another
    for_each_chain<kChains>([&](auto k) { chain_steps<K, R, T>(p, n0, n_full, k, c[k]); });
  }
  if (partial) {
    for_each_chain<kChains>([&](auto k) {
      if (last_chain == k) K::template last_step<R, T>(p, n0 + n_full, s1, c[k]);
    });
  }
  for (size_t j = 0; j < T; ++j) {
    for (size_t i = 0; i < R; ++i) {
      if constexpr (kChains == 2) {
        sum[j][i] = K::add(c[0][j][i], c[1][j][i]);
      } else {
        sum[j][i] = K::add(K::add(c[0][j][i], c[1][j][i]), K::add(c[2][j][i], c[3][j][i]));
      }
    }
  }
}

// Rows [r0, r0 + R) x tokens [t0, t0 + T): the segments of [c0, c1) (c0 a multiple of kSegment) into y.
template <class K, size_t R, size_t T>
void tile(const K& k, size_t r0, size_t t0, size_t c0, size_t c1) {
  const auto p = k.template pointers<R, T>(r0, t0);
  for (size_t s = c0; s < c1; s += K::kSegment) {
    Acc<K, R, T> acc;
    segment<K, R, T>(p, s, s + K::kSegment < c1 ? s + K::kSegment : c1, acc);
    for (size_t j = 0; j < T; ++j) {
      float sums[R];
      K::template reduce<R>(acc[j], sums);
      float* y = k.op.y + (t0 + j) * k.op.w.rows + r0;
      for (size_t i = 0; i < R; ++i) add_segment(y[i], sums[i], s);
    }
  }
}

template <class K, size_t R, size_t... Ts>
inline void dispatch_tokens(const K& k, size_t nt, size_t r, size_t t, size_t c0, size_t c1,
                            std::index_sequence<Ts...>) {
  (void)((nt == Ts + 1 ? (tile<K, R, Ts + 1>(k, r, t, c0, c1), true) : false) || ...);
}

// Rows [r, r_end) for one token tile: as many full R-row tiles as fit, then halves down to 1 row.
template <class K, size_t R>
inline void rows_for_tokens(const K& k, size_t r, size_t r_end, size_t t, size_t nt, size_t c0, size_t c1) {
  for (; r + R <= r_end; r += R) dispatch_tokens<K, R>(k, nt, r, t, c0, c1, std::make_index_sequence<K::kMaxTokens>{});
  if constexpr (R > 1) {
    if (r < r_end) rows_for_tokens<K, R / 2>(k, r, r_end, t, nt, c0, c1);
  }
}

// Output rows [row_begin, row_end) for all n_tokens tokens over cols columns.
template <class K>
void run(const K& k, size_t row_begin, size_t row_end, size_t n_tokens, size_t cols) {
  static_assert(K::kColChunk % K::kSegment == 0 && K::kSegment % K::kStep == 0,
                "a column chunk holds whole segments, a segment whole steps");
  if (n_tokens == 1) {  // decode: stream each weight row once, no column chunks
    rows_for_tokens<K, K::kDecodeRowTile>(k, row_begin, row_end, 0, 1, 0, cols);
    return;
  }
  for (size_t rb = row_begin; rb < row_end; rb += kRowBlock) {
    const size_t rb_end = rb + kRowBlock < row_end ? rb + kRowBlock : row_end;
    for (size_t c0 = 0; c0 < cols; c0 += K::kColChunk) {
      const size_t c1 = c0 + K::kColChunk < cols ? c0 + K::kColChunk : cols;
      // The token tile's activations over [c0, c1) stay in L1 while the block's row tiles pass.
      for (size_t t = 0; t < n_tokens; t += K::kMaxTokens) {
        const size_t nt = n_tokens - t < K::kMaxTokens ? n_tokens - t : K::kMaxTokens;
        rows_for_tokens<K, K::kRowTile>(k, rb, rb_end, t, nt, c0, c1);
      }
    }
  }
}

}  // namespace kvs::tiling
