// AVX-512 VNNI matmul over packed Q8_0 weights (tensor/packed_q8.h) and int8 block activations.
//
// One vpdpbusd takes a 64-byte quad (16 rows x 4 columns of w + 128) and 4 activation bytes broadcast to
// all lanes, and adds each row's 4 products to that row's int32 lane. A block's 8 quads give the exact
// block dot products of 16 rows at once; the int32 lanes start from the activation block's offset
// (-128 * sum of its bytes), which cancels the +128 of the weights exactly.
//
// Canonical order (batch invariance, see matmul.h): for one (row, token), acc = 0, then for every block b
// in column order acc = fma(float(dot_b), d_w(b) * d_a(b), acc). The block dot is exact in int32 (however
// its quads are split), the product and the fma are one IEEE operation each, so the result depends on the
// row and the token only, never on the tile, the column chunk or the thread split. (Column chunks park acc
// in y and load it back: exact.)
#include <cstring>
#include <utility>

#include "core/status.h"
#include "tensor/matmul_internal.h"
#include "tensor/packed_q8.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;
using L = PackedQ8Layout;

constexpr size_t kTileGroups = 2;      // groups per tile: each activation broadcast feeds 2 vpdpbusd
constexpr size_t kMaxTokens = 6;       // 2 x 6 x (int32 sums + fp32 accumulators) = 24 of the 32 registers
constexpr size_t kGroupsPerBlock = 4;  // 64 rows whose column chunk stays in L2 while token tiles pass
constexpr size_t kChunkBlocks = 64;    // 2048 columns: 6 tokens x 2 KiB of activations stay in L1

KVS_ALWAYS_INLINE __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// The activations of tokens t0 .. t0 + T - 1.
template <size_t T>
struct Tokens {
  const int8_t* a[T];
  const float* scale[T];
  const int32_t* offset[T];
  Tokens(const QuantizedActivations& xq, size_t t0) {
    for (size_t t = 0; t < T; ++t) {
      a[t] = xq.token_qs(t0 + t);
      scale[t] = xq.token_scales(t0 + t);
      offset[t] = xq.token_offsets(t0 + t);
    }
  }
};

// acc[i][t] (lane l = row l of group i) += block b of group i's rows . token t.
// prefetch > 0: also asks for the same block `prefetch` bytes further on (the next row block) into L2.
template <size_t R, size_t T>
KVS_ALWAYS_INLINE void block(const std::byte* const (&groups)[R], const Tokens<T>& x, size_t b, size_t prefetch,
                             __m512 (&acc)[R][T]) {
  const __m512i* quads[R];
  for (size_t i = 0; i < R; ++i) quads[i] = reinterpret_cast<const __m512i*>(groups[i] + L::block_offset(b));
  if (prefetch) {
    for (size_t i = 0; i < R; ++i) {
      const char* next = reinterpret_cast<const char*>(quads[i]) + prefetch;
      for (size_t q = 0; q < 8; ++q) _mm_prefetch(next + q * L::kQuadBytes, _MM_HINT_T1);
      if (b % 2 == 0)
        _mm_prefetch(reinterpret_cast<const char*>(groups[i] + L::scales_offset(b)) + prefetch, _MM_HINT_T1);
    }
  }
  const size_t c = b * L::kBlock;
  __m512i dot[R][T];
#pragma GCC unroll 8
  for (size_t t = 0; t < T; ++t) {
    const __m512i offset = _mm512_set1_epi32(x.offset[t][b]);
    for (size_t i = 0; i < R; ++i) dot[i][t] = offset;
  }
  if constexpr (R * T <= 2) {  // two dependency chains per (group, token): few leave vpdpbusd latency exposed
    __m512i odd[R][T];
    for (size_t i = 0; i < R; ++i)
      for (size_t t = 0; t < T; ++t) odd[i][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (size_t q = 0; q < 8; q += 2) {
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) {
        const __m512i w0 = _mm512_load_si512(quads[i] + q);
        const __m512i w1 = _mm512_load_si512(quads[i] + q + 1);
#pragma GCC unroll 8
        for (size_t t = 0; t < T; ++t) {
          dot[i][t] = _mm512_dpbusd_epi32(dot[i][t], w0, broadcast4(x.a[t] + c + 4 * q));
          odd[i][t] = _mm512_dpbusd_epi32(odd[i][t], w1, broadcast4(x.a[t] + c + 4 * q + 4));
        }
      }
    }
    for (size_t i = 0; i < R; ++i)
      for (size_t t = 0; t < T; ++t) dot[i][t] = _mm512_add_epi32(dot[i][t], odd[i][t]);
  } else {
#pragma GCC unroll 8
    for (size_t q = 0; q < 8; ++q) {
      __m512i w[R];
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) w[i] = _mm512_load_si512(quads[i] + q);
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        const __m512i a = broadcast4(x.a[t] + c + 4 * q);  // one broadcast feeds R groups
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) dot[i][t] = _mm512_dpbusd_epi32(dot[i][t], w[i], a);
      }
    }
  }
  __m512 dw[R];
  for (size_t i = 0; i < R; ++i) {
    dw[i] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(groups[i] + L::scales_offset(b))));
  }
#pragma GCC unroll 8
  for (size_t t = 0; t < T; ++t) {
    const __m512 da = _mm512_set1_ps(x.scale[t][b]);
#pragma GCC unroll 8
    for (size_t i = 0; i < R; ++i) {
      acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][t]), _mm512_mul_ps(dw[i], da), acc[i][t]);
    }
  }
}

// Blocks [b0, b1), b0 even, a unit (two blocks) per iteration: every load instruction then walks memory
// with one constant stride (a unit), which the hardware stride prefetcher follows. (Block by block the
// strides alternate 512 / 576 bytes, and decode read DRAM at 60-75% of the rate.)
template <size_t R, size_t T>
KVS_ALWAYS_INLINE void group_blocks(const std::byte* const (&groups)[R], const Tokens<T>& x, size_t b0, size_t b1,
                                    size_t prefetch, __m512 (&acc)[R][T]) {
  size_t b = b0;
#pragma GCC unroll 1
  for (; b + 2 <= b1; b += 2) {
    block<R, T>(groups, x, b, prefetch, acc);
    block<R, T>(groups, x, b + 1, prefetch, acc);
  }
  if (b < b1) block<R, T>(groups, x, b, prefetch, acc);
}

// Groups of rows starting at r0 (R x 16 rows; the last group may be padded) x tokens [t0, t0 + T) over
// blocks [b0, b1).
template <size_t R, size_t T>
void tile(const MatmulOperands& op, const L& layout, size_t r0, size_t t0, size_t b0, size_t b1, size_t prefetch) {
  const std::byte* groups[R];
  __mmask16 masks[R];
  __m512 acc[R][T];
  for (size_t i = 0; i < R; ++i) {
    const size_t r = r0 + i * L::kGroupRows;
    groups[i] = op.w.data + r / L::kGroupRows * layout.group_bytes();
    const size_t valid = op.w.rows - r < L::kGroupRows ? op.w.rows - r : L::kGroupRows;
    masks[i] = tail_mask16(valid);
    for (size_t t = 0; t < T; ++t) {
      acc[i][t] = b0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(masks[i], op.y + (t0 + t) * op.w.rows + r);
    }
  }
  // A literal 0 lets the inlined loop drop the prefetch code (every tile but the first token tile's).
  if (prefetch) {
    group_blocks<R, T>(groups, Tokens<T>(*op.xq, t0), b0, b1, prefetch, acc);
  } else {
    group_blocks<R, T>(groups, Tokens<T>(*op.xq, t0), b0, b1, 0, acc);
  }
  for (size_t i = 0; i < R; ++i) {
    for (size_t t = 0; t < T; ++t) {
      _mm512_mask_storeu_ps(op.y + (t0 + t) * op.w.rows + r0 + i * L::kGroupRows, masks[i], acc[i][t]);
    }
  }
}

template <size_t R, size_t... Ts>
void dispatch_tokens(const MatmulOperands& op, const L& layout, size_t nt, size_t r0, size_t t0, size_t b0, size_t b1,
                     size_t prefetch, std::index_sequence<Ts...>) {
  (void)((nt == Ts + 1 ? (tile<R, Ts + 1>(op, layout, r0, t0, b0, b1, prefetch), true) : false) || ...);
}

}  // namespace

void matmul_q8_0x16_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  KVS_ASSERT(row_begin % L::kGroupRows == 0 && (row_end % L::kGroupRows == 0 || row_end == op.w.rows),
             "packed q8_0 matmul: rows [{}, {}) of {} do not start and end on groups of {}", row_begin, row_end,
             op.w.rows, L::kGroupRows);
  const L layout{.rows = op.w.rows, .cols = op.w.cols};
  const size_t nb = layout.blocks();
  if (op.n_tokens == 1) {  // decode: each group is one sequential stream, read once
    for (size_t r = row_begin; r < row_end; r += L::kGroupRows) tile<1, 1>(op, layout, r, 0, 0, nb, 0);
    return;
  }
  constexpr size_t kRowBlock = kGroupsPerBlock * L::kGroupRows;
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
        for (; r + kTileGroups * L::kGroupRows <= rb_end || (r + L::kGroupRows < rb_end && rb_end == op.w.rows);
             r += kTileGroups * L::kGroupRows) {
          dispatch_tokens<kTileGroups>(op, layout, nt, r, t, b0, b1, prefetch, std::make_index_sequence<kMaxTokens>{});
        }
        if (r < rb_end)
          dispatch_tokens<1>(op, layout, nt, r, t, b0, b1, prefetch, std::make_index_sequence<kMaxTokens>{});
      }
    }
  }
}

}  // namespace kvs::detail
