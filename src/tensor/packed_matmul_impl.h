// The matmul over packed block-quantized weights (tensor/packed_weights.h) and int8 block activations, written once
// for every ISA and type: S is the ISA's vector operations (matmul_packed_avx512.cpp: 16 int32 lanes with VNNI;
// matmul_packed_avxvnni.cpp and matmul_packed_avx2.cpp: 8 lanes, with the VEX vpdpbusd or without it).
// Internal linkage (an anonymous namespace): each of those files gets its own copy, compiled with its own
// flags.
//
// A block's quads become exact int32 dot products as packed_quads.h says, per type.
//
// Canonical order (batch invariance, see matmul.h): for one (row, token), acc = 0, then
//   Q8_0, Q4_0, Q5_0, IQ4_NL: for every block b in column order acc = fma(float(dot_b), d_w(b) * d_a(b), acc);
//   Q4_1, Q5_1: the same, then acc = fma(m_w(b), d_a(b) * float(sum_b(a)), acc);
//   Q4_K:       for every super-block in column order, with its blocks j = 0..7 (b = 8s + j):
//                 sb = 0; for j: sb = fma(float(dot_b), float(sc_j) * d_a(b), sb)
//                 mb = 0; for j: mb = fma(float(m_j), d_a(b) * float(sum_b(a)), mb)
//                 acc = fma(d, sb, acc); acc = fma(-dmin, mb, acc)
//               (the format's value d sc_j q - dmin m_j: both products are exact in fp32). Q5_K: the same.
//   IQ4_XS:     as Q4_K without the mins (sc_j = ls_j - 32).
//   Q6_K:       for every super-block, with its 16-column groups g = 0..15 (of block b = 8s + g / 2):
//                 sb = 0; for g: sb = fma(float(dot_g), float(sc_g) * d_a(b), sb)   (dot_g: of q - 32)
//                 acc = fma(d, sb, acc)
// The block dot is exact in int32 (however its quads are split), every product and fma is one IEEE
// operation, so the result depends on the row and the token only, never on the ISA, the tile, the column
// chunk or the thread split. (Column chunks are whole super-blocks and park acc in y: exact.)
//
// S provides: I, V (integer and float vectors); kLanes (G), kTileGroups, kMaxTokens, kVnni,
// kMaxTokensKQuant (the super-block types' tile: their super-block sums need a third set of registers); load(p)
// (aligned), bcast4(p), set1(int32), zero(), add32, add16, dpbusd (kVnni) or maddubs, madd_ones, sign8(a, w), abs8,
// xor80 (not kVnni); low_nibbles(v), srl4(v); table16(p) (16 bytes in every 128-bit lane), lookup16(table, v) (each
// byte of v, 0..15, replaced by the table's byte); scales(p) (G fp16 to fp32), bytes_ps(p) (G unsigned bytes to
// fp32), sbytes_ps(p) (G signed bytes), or_, and8(v, byte), sll16(v, n), srl16(v, n) (16-bit lane shifts),
// cvt, set1_ps, mul, fmadd, fnmadd, zero_ps; load_y(p, n) and store_y(p, v, n) of the first n lanes.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/status.h"
#include "tensor/matmul_internal.h"
#include "tensor/packed_quads.h"
#include "tensor/packed_weights.h"

namespace kvs::detail {
namespace {

template <class S, DType kType>
struct PackedKernel : PackedQuads<S, kType> {
  using I = typename S::I;
  using V = typename S::V;
  static constexpr size_t G = S::kLanes;
  using Base = PackedQuads<S, kType>;
  using Base::finish, Base::mac, Base::merge, Base::quads, Base::start, Base::widening_mac;
  using Base::kBlockMins, Base::kIq4Xs, Base::kKMins, Base::kQ6, Base::kQ8, Base::kQuadBytes, Base::kSuperBlocks;
  using typename Base::Quad;
  static constexpr size_t kMaxTokens = kSuperBlocks ? S::kMaxTokensKQuant : S::kMaxTokens;
  static constexpr size_t kSuperBlockBlocks = PackedLayout::kSuperBlockBlocks;
  static constexpr size_t kGroupsPerBlock = 4;  // rows whose column chunk stays in L2 while token tiles pass
  static constexpr size_t kChunkBlocks = 64;    // 2048 columns: a token tile's activations stay in L1

  // The activations of tokens t0 .. t0 + T - 1.
  template <size_t T>
  struct Tokens {
    const int8_t* a[T];
    const float* scale[T];
    const int32_t* offset[T];
    const int16_t* group_sum[T];  // per 16 columns
    Tokens(const QuantizedActivations& xq, size_t t0) {
      for (size_t t = 0; t < T; ++t) {
        a[t] = xq.token_qs(t0 + t);
        scale[t] = xq.token_scales(t0 + t);
        offset[t] = xq.token_offsets(t0 + t);
        group_sum[t] = xq.token_group_sums(t0 + t);
      }
    }
  };

  // The offsets inside a group, from the type and G alone (the layout's rows and columns do not enter them): taken
  // from op's layout at run time they cost the decode loop a division and the type's branches per block, and in a
  // function this large GCC did not inline even PackedLayout's constexpr ones (a call, with a vzeroupper, every other
  // block). The same offsets as PackedLayout's, which the kernels' tests hold them to (the bits of every type).
  static constexpr PackedLayout kShape{.type = kType, .group_rows = G};
  static constexpr size_t kUnitBlocks = kShape.unit_blocks(), kUnitBytes = kShape.unit_bytes();
  static constexpr size_t kHeaderBytes = kShape.header_bytes(), kBlockBytes = kShape.quant_bytes();
  static KVS_ALWAYS_INLINE size_t unit_offset(size_t b) { return b / kUnitBlocks * kUnitBytes; }
  static KVS_ALWAYS_INLINE size_t block_offset(size_t b) {
    return unit_offset(b) + kHeaderBytes + b % kUnitBlocks * kBlockBytes;
  }
  static KVS_ALWAYS_INLINE size_t scales_offset(size_t b) { return unit_offset(b) + b % 2 * 2 * G; }
  static KVS_ALWAYS_INLINE size_t mins_offset(size_t b) { return unit_offset(b) + (4 + b % 2 * 2) * G; }
  static KVS_ALWAYS_INLINE size_t k_scales_offset(size_t j) { return (4 + j) * G; }
  static KVS_ALWAYS_INLINE size_t k_mins_offset(size_t j) { return (12 + j) * G; }
  static constexpr size_t kDminOffset = 2 * G;

  const MatmulOperands& op;
  PackedLayout layout;

  // Asks for `bytes` bytes at p + prefetch (the same place in the next row block) into L2.
  static KVS_ALWAYS_INLINE void prefetch_l2(const std::byte* p, size_t bytes, size_t prefetch) {
    const char* next = reinterpret_cast<const char*>(p) + prefetch;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T1);
  }

  // dot[i][t] (lane l = row l of group i) = the exact dot of block b of group i's rows with token t; blk[i]
  // is the block's quads (or pairs) in group i.
  template <size_t R, size_t T>
  KVS_ALWAYS_INLINE void block_dots(const std::byte* const (&blk)[R], const Tokens<T>& x, size_t b,
                                    I (&dot)[R][T]) const {
    const size_t c = b * PackedLayout::kBlock;
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      const I s = start(x.offset[t][b]);
      for (size_t i = 0; i < R; ++i) dot[i][t] = s;
    }
    if constexpr (R * T <= 2) {  // two dependency chains per (group, token): few leave the latency exposed
      I odd[R][T];
      for (size_t i = 0; i < R; ++i)
        for (size_t t = 0; t < T; ++t) odd[i][t] = S::zero();
#pragma GCC unroll 8
      for (size_t q = 0; q < 8; q += 2) {
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) {
          Quad w0, w1;
          quads(blk[i], q, w0, w1);
#pragma GCC unroll 8
          for (size_t t = 0; t < T; ++t) {
            dot[i][t] = mac(dot[i][t], w0, S::bcast4(x.a[t] + c + 4 * q));
            odd[i][t] = mac(odd[i][t], w1, S::bcast4(x.a[t] + c + 4 * q + 4));
          }
        }
      }
      for (size_t i = 0; i < R; ++i)
        for (size_t t = 0; t < T; ++t) dot[i][t] = merge(dot[i][t], odd[i][t]);
    } else {
#pragma GCC unroll 8
      for (size_t q = 0; q < 8; q += 2) {
        Quad w[R][2];
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) quads(blk[i], q, w[i][0], w[i][1]);
#pragma GCC unroll 2
        for (size_t k = 0; k < 2; ++k) {
#pragma GCC unroll 8
          for (size_t t = 0; t < T; ++t) {
            const I a = S::bcast4(x.a[t] + c + 4 * (q + k));  // one broadcast feeds R groups
#pragma GCC unroll 8
            for (size_t i = 0; i < R; ++i) dot[i][t] = mac(dot[i][t], w[i][k], a);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t)
      for (size_t i = 0; i < R; ++i) dot[i][t] = finish(dot[i][t], x.offset[t][b]);
  }

  // The 32-value types: acc[i][t] += block b of group i's rows . token t.
  // prefetch > 0: also asks for the same block `prefetch` bytes further on (the next row block) into L2.
  template <size_t R, size_t T>
  KVS_ALWAYS_INLINE void block(const std::byte* const (&groups)[R], const Tokens<T>& x, size_t b, size_t prefetch,
                               V (&acc)[R][T]) const {
    const std::byte* blk[R];
    for (size_t i = 0; i < R; ++i) blk[i] = groups[i] + block_offset(b);
    if (prefetch) {
      for (size_t i = 0; i < R; ++i) {
        prefetch_l2(blk[i], kBlockBytes, prefetch);
        if (b % 2 == 0) prefetch_l2(groups[i] + unit_offset(b), kHeaderBytes, prefetch);
      }
    }
    I dot[R][T];
    block_dots<R, T>(blk, x, b, dot);
    V dw[R];
    for (size_t i = 0; i < R; ++i) dw[i] = S::scales(groups[i] + scales_offset(b));
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      const V da = S::set1_ps(x.scale[t][b]);
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) acc[i][t] = S::fmadd(S::cvt(dot[i][t]), S::mul(dw[i], da), acc[i][t]);
    }
    if constexpr (kBlockMins) {
      V mw[R];
      for (size_t i = 0; i < R; ++i) mw[i] = S::scales(groups[i] + mins_offset(b));
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        const V dsum = S::set1_ps(x.scale[t][b] * static_cast<float>(-x.offset[t][b] / 128));
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) acc[i][t] = S::fmadd(mw[i], dsum, acc[i][t]);
      }
    }
  }

  // K-quants: the header of the unit (super-block) holding block b0 in each of the R groups, and the quant bytes of
  // block b; prefetch as for block().
  template <size_t R>
  KVS_ALWAYS_INLINE void unit_headers(const std::byte* const (&groups)[R], size_t b0, size_t prefetch,
                                      const std::byte* (&header)[R]) const {
    for (size_t i = 0; i < R; ++i) {
      header[i] = groups[i] + unit_offset(b0);
      if (prefetch) prefetch_l2(header[i], kHeaderBytes, prefetch);
    }
  }
  template <size_t R>
  KVS_ALWAYS_INLINE void block_quants(const std::byte* const (&groups)[R], size_t b, size_t prefetch,
                                      const std::byte* (&blk)[R]) const {
    for (size_t i = 0; i < R; ++i) {
      blk[i] = groups[i] + block_offset(b);
      if (prefetch) prefetch_l2(blk[i], kBlockBytes, prefetch);
    }
  }

  // Q6_K: bits 4-5 of the values of quad q (0..3) of a 16-column group, from the group's high vector.
  static KVS_ALWAYS_INLINE I q6_high(I hv, size_t q) {
    const I v = q == 0 ? S::sll16(hv, 4) : q == 1 ? S::sll16(hv, 2) : q == 2 ? hv : S::srl16(hv, 2);
    return S::and8(v, 0x30);
  }

  // Q6_K: acc[i][t] += the super-block of blocks [b0, b0 + 8) of group i's rows . token t, in the canonical
  // order above.
  template <size_t R, size_t T>
  KVS_ALWAYS_INLINE void q6_super_block(const std::byte* const (&groups)[R], const Tokens<T>& x, size_t b0,
                                        size_t prefetch, V (&acc)[R][T]) const {
    const std::byte* header[R];
    unit_headers<R>(groups, b0, prefetch, header);
    V sb[R][T];
    for (size_t i = 0; i < R; ++i)
      for (size_t t = 0; t < T; ++t) sb[i][t] = S::zero_ps();
#pragma GCC unroll 1
    for (size_t j = 0; j < kSuperBlockBlocks; ++j) {
      const size_t b = b0 + j;
      const std::byte* blk[R];
      block_quants<R>(groups, b, prefetch, blk);
#pragma GCC unroll 2
      for (size_t h = 0; h < 2; ++h) {  // the block's two 16-column groups
        I dot[R][T];
        for (size_t t = 0; t < T; ++t) {
          const I s = S::set1(-32 * x.group_sum[t][2 * b + h]);
          for (size_t i = 0; i < R; ++i) dot[i][t] = s;
        }
        I hv[R];
        for (size_t i = 0; i < R; ++i) hv[i] = S::load(blk[i] + (4 + h) * kQuadBytes);
#pragma GCC unroll 4
        for (size_t q = 0; q < 4; ++q) {
          I u[R];
          for (size_t i = 0; i < R; ++i) {
            const I pair = S::load(blk[i] + (2 * h + q / 2) * kQuadBytes);
            u[i] = S::or_(S::low_nibbles(q % 2 ? S::srl4(pair) : pair), q6_high(hv[i], q));
          }
#pragma GCC unroll 8
          for (size_t t = 0; t < T; ++t) {
            const I a = S::bcast4(x.a[t] + PackedLayout::kBlock * b + 16 * h + 4 * q);
            for (size_t i = 0; i < R; ++i) dot[i][t] = widening_mac(dot[i][t], u[i], a);
          }
        }
        V sc[R];
        for (size_t i = 0; i < R; ++i) sc[i] = S::sbytes_ps(header[i] + k_scales_offset(2 * j + h));
#pragma GCC unroll 8
        for (size_t t = 0; t < T; ++t) {
          const V da = S::set1_ps(x.scale[t][b]);
          for (size_t i = 0; i < R; ++i) sb[i][t] = S::fmadd(S::cvt(dot[i][t]), S::mul(sc[i], da), sb[i][t]);
        }
      }
    }
    for (size_t i = 0; i < R; ++i) {
      const V d = S::scales(header[i]);
      for (size_t t = 0; t < T; ++t) acc[i][t] = S::fmadd(d, sb[i][t], acc[i][t]);
    }
  }

  // Q4_K, Q5_K, IQ4_XS (Q6_K: above): acc[i][t] += the super-block of blocks [b0, b0 + 8) of group i's rows . token t,
  // in the canonical order above. prefetch as for block().
  template <size_t R, size_t T>
  KVS_ALWAYS_INLINE void super_block(const std::byte* const (&groups)[R], const Tokens<T>& x, size_t b0,
                                     size_t prefetch, V (&acc)[R][T]) const {
    if constexpr (kQ6) {
      q6_super_block<R, T>(groups, x, b0, prefetch, acc);
      return;
    }
    const std::byte* header[R];
    unit_headers<R>(groups, b0, prefetch, header);
    V sb[R][T];
    for (size_t i = 0; i < R; ++i)
      for (size_t t = 0; t < T; ++t) sb[i][t] = S::zero_ps();
#pragma GCC unroll 1
    for (size_t j = 0; j < kSuperBlockBlocks; ++j) {
      const size_t b = b0 + j;
      const std::byte* blk[R];
      block_quants<R>(groups, b, prefetch, blk);
      I dot[R][T];
      block_dots<R, T>(blk, x, b, dot);
      V sc[R];
      for (size_t i = 0; i < R; ++i) {
        sc[i] = kIq4Xs ? S::sbytes_ps(header[i] + k_scales_offset(j)) : S::bytes_ps(header[i] + k_scales_offset(j));
      }
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        const V da = S::set1_ps(x.scale[t][b]);
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) sb[i][t] = S::fmadd(S::cvt(dot[i][t]), S::mul(sc[i], da), sb[i][t]);
      }
    }
    if constexpr (!kKMins) {
      for (size_t i = 0; i < R; ++i) {
        const V d = S::scales(header[i]);
        for (size_t t = 0; t < T; ++t) acc[i][t] = S::fmadd(d, sb[i][t], acc[i][t]);
      }
      return;
    }
    // The mins' side: per token the 8 blocks' d_a sum(a), then per group its 8 mins against them.
    float dsum[T][kSuperBlockBlocks];
    for (size_t t = 0; t < T; ++t) {
      for (size_t j = 0; j < kSuperBlockBlocks; ++j) {
        dsum[t][j] = x.scale[t][b0 + j] * static_cast<float>(-x.offset[t][b0 + j] / 128);
      }
    }
#pragma GCC unroll 2
    for (size_t i = 0; i < R; ++i) {
      V m[kSuperBlockBlocks];
      for (size_t j = 0; j < kSuperBlockBlocks; ++j) m[j] = S::bytes_ps(header[i] + k_mins_offset(j));
      const V d = S::scales(header[i]), dmin = S::scales(header[i] + kDminOffset);
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        V mb = S::zero_ps();
        for (size_t j = 0; j < kSuperBlockBlocks; ++j) mb = S::fmadd(m[j], S::set1_ps(dsum[t][j]), mb);
        acc[i][t] = S::fnmadd(dmin, mb, S::fmadd(d, sb[i][t], acc[i][t]));
      }
    }
  }

  // Blocks [b0, b1), b0 even, a unit (two blocks) per iteration: every load instruction then walks memory
  // with one constant stride (a unit), which the hardware stride prefetcher follows. (Block by block the
  // strides alternate, and decode read DRAM at 60-75% of the rate.)
  template <size_t R, size_t T>
  KVS_ALWAYS_INLINE void group_blocks(const std::byte* const (&groups)[R], const Tokens<T>& x, size_t b0, size_t b1,
                                      size_t prefetch, V (&acc)[R][T]) const {
    if constexpr (kSuperBlocks) {  // b0, b1: whole super-blocks
#pragma GCC unroll 1
      for (size_t b = b0; b < b1; b += kSuperBlockBlocks) super_block<R, T>(groups, x, b, prefetch, acc);
      return;
    }
    size_t b = b0;
#pragma GCC unroll 1
    for (; b + 2 <= b1; b += 2) {
      block<R, T>(groups, x, b, prefetch, acc);
      block<R, T>(groups, x, b + 1, prefetch, acc);
    }
    if (b < b1) block<R, T>(groups, x, b, prefetch, acc);
  }

  // Groups of rows starting at r0 (R x G rows; the last group may be padded) x tokens [t0, t0 + T) over
  // blocks [b0, b1).
  template <size_t R, size_t T>
  void tile(size_t r0, size_t t0, size_t b0, size_t b1, size_t prefetch) const {
    const std::byte* groups[R];
    size_t valid[R];
    V acc[R][T];
    for (size_t i = 0; i < R; ++i) {
      const size_t r = r0 + i * G;
      groups[i] = op.w.data + r / G * layout.group_bytes();
      valid[i] = op.w.rows - r < G ? op.w.rows - r : G;
      for (size_t t = 0; t < T; ++t) {
        acc[i][t] = b0 == 0 ? S::zero_ps() : S::load_y(op.y + (t0 + t) * op.w.rows + r, valid[i]);
      }
    }
    // A literal 0 lets the inlined loop drop the prefetch code (every tile but the first token tile's).
    if (prefetch) {
      group_blocks<R, T>(groups, Tokens<T>(*op.xq, t0), b0, b1, prefetch, acc);
    } else {
      group_blocks<R, T>(groups, Tokens<T>(*op.xq, t0), b0, b1, 0, acc);
    }
    for (size_t i = 0; i < R; ++i) {
      for (size_t t = 0; t < T; ++t) S::store_y(op.y + (t0 + t) * op.w.rows + r0 + i * G, acc[i][t], valid[i]);
    }
  }

  template <size_t R, size_t... Ts>
  void dispatch_tokens(size_t nt, size_t r0, size_t t0, size_t b0, size_t b1, size_t prefetch,
                       std::index_sequence<Ts...>) const {
    (void)((nt == Ts + 1 ? (tile<R, Ts + 1>(r0, t0, b0, b1, prefetch), true) : false) || ...);
  }

  void run(size_t row_begin, size_t row_end) const {
    KVS_ASSERT(row_begin % G == 0 && (row_end % G == 0 || row_end == op.w.rows),
               "packed {} matmul: rows [{}, {}) of {} do not start and end on groups of {}", dtype_name(kType),
               row_begin, row_end, op.w.rows, G);
    const size_t nb = layout.blocks();
    // Decode: each group is one sequential stream, read once; four at a time, whose independent dot chains and
    // streams moved 1.2-1.6x the bytes per second of one at a time (bench_kernels MatvecCold, every packed type).
    // Every block also asks for its stream's bytes kDecodePrefetch further on into L2: the hardware prefetchers
    // alone kept the types of 4-6 bits a value at about half of the bandwidth (the loads' wait dominated their
    // profile), with it Q4_0 decode ran 1.4-1.85x (MatvecColdExpert, and a 27-layer Q4_0 model); Q8_0, at the
    // bandwidth already, lost 5-13% to the prefetches' instructions and goes without.
    if (op.n_tokens == 1) {
      constexpr size_t kDecodePrefetch = kQ8 ? 0 : 2048;
      size_t r = row_begin;
      for (; r + 3 * G < row_end; r += 4 * G) tile<4, 1>(r, 0, 0, nb, kDecodePrefetch);
      for (; r < row_end; r += G) tile<1, 1>(r, 0, 0, nb, kDecodePrefetch);
      return;
    }
    constexpr size_t kTile = S::kTileGroups, kRowBlock = kGroupsPerBlock * G;
    for (size_t rb = row_begin; rb < row_end; rb += kRowBlock) {
      const size_t rb_end = rb + kRowBlock < row_end ? rb + kRowBlock : row_end;
      for (size_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const size_t b1 = b0 + kChunkBlocks < nb ? b0 + kChunkBlocks : nb;
        for (size_t t = 0; t < op.n_tokens; t += kMaxTokens) {
          const size_t nt = op.n_tokens - t < kMaxTokens ? op.n_tokens - t : kMaxTokens;
          // The first token tile brings the next row block towards L2 while the rest compute from cache; past
          // row_end too, where this thread's next chunk of rows usually starts (ThreadPool::for_chunks).
          const size_t prefetch = t == 0 && rb_end < op.w.rows ? kGroupsPerBlock * layout.group_bytes() : 0;
          size_t r = rb;
          for (; r + kTile * G <= rb_end || (r + (kTile - 1) * G < rb_end && rb_end == op.w.rows); r += kTile * G) {
            dispatch_tokens<kTile>(nt, r, t, b0, b1, prefetch, std::make_index_sequence<kMaxTokens>{});
          }
          for (; r < rb_end; r += G) {
            dispatch_tokens<1>(nt, r, t, b0, b1, prefetch, std::make_index_sequence<kMaxTokens>{});
          }
        }
      }
    }
  }
};

// The kernel for op.w in its packed layout (of type kType, in groups of S::kLanes).
template <class S, DType kType>
void matmul_packed(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const PackedLayout layout = PackedLayout::of(op.w);
  KVS_ASSERT(layout.type == kType && layout.group_rows == S::kLanes,
             "packed matmul: a {} kernel for groups of {} got {} weights in layout {}", dtype_name(kType), S::kLanes,
             dtype_name(op.w.type), weight_layout_name(op.w.layout));
  PackedKernel<S, kType>{{}, op, layout}.run(row_begin, row_end);
}

// The kernel of S for packed weights of `type`; nullptr when `type` is not packable.
template <class S>
MatmulRowsFn packed_kernel_for(DType type) {
  switch (type) {
    case DType::kQ8_0: return matmul_packed<S, DType::kQ8_0>;
    case DType::kQ4_0: return matmul_packed<S, DType::kQ4_0>;
    case DType::kQ4_1: return matmul_packed<S, DType::kQ4_1>;
    case DType::kQ5_0: return matmul_packed<S, DType::kQ5_0>;
    case DType::kQ5_1: return matmul_packed<S, DType::kQ5_1>;
    case DType::kIQ4_NL: return matmul_packed<S, DType::kIQ4_NL>;
    case DType::kIQ4_XS: return matmul_packed<S, DType::kIQ4_XS>;
    case DType::kQ4_K: return matmul_packed<S, DType::kQ4_K>;
    case DType::kQ5_K: return matmul_packed<S, DType::kQ5_K>;
    case DType::kQ6_K: return matmul_packed<S, DType::kQ6_K>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace kvs::detail
