// AVX-512 BF16 matmul for BF16 weights, decode and prefill alike (one path for every n_tokens keeps the
// results batch-invariant): vdpbf16ps on bf16 weights and bf16-rounded activations (xb), 32 products per
// instruction, twice the fp32 FMA rate. Needs AVX512_BF16 (cpu_has_avx512_bf16()).
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

KVS_ALWAYS_INLINE __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

struct Bf16DotKernel {
  using Vec = __m512;
  static constexpr size_t kStep = 32;
  static constexpr size_t kStripe = 8;  // 256 columns: 8 lines of weights
  static constexpr size_t kChains = 2;
  static constexpr size_t kMaxRegisterChains = 16;
  static constexpr size_t kSegment = 2048;
  static constexpr size_t kRowTile = 4;
  // Decode streams one row at a time, as for the other 2-byte weights (matmul_float_avx512.cpp).
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kMaxTokens = 6;    // 4 x 6 accumulators + 4 weight vectors of 32 registers
  static constexpr size_t kColChunk = 2048;  // 6 tokens x 4 KiB of bf16 activations stay in L1

  const MatmulOperands& op;
  size_t row_stride;  // bytes

  template <size_t R, size_t T>
  struct Pointers {
    const uint16_t* w[R];
    const uint16_t* x[T];
  };
  template <size_t R, size_t T>
  Pointers<R, T> pointers(size_t r0, size_t t0) const {
    Pointers<R, T> p;
    for (size_t i = 0; i < R; ++i) p.w[i] = reinterpret_cast<const uint16_t*>(op.w.data + (r0 + i) * row_stride);
    for (size_t j = 0; j < T; ++j) p.x[j] = op.xb->token(t0 + j);
    return p;
  }

  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const size_t c = n * kStep;
    __m512bh wv[R];
#pragma GCC unroll 8
    for (size_t i = 0; i < R; ++i) wv[i] = as_bh(_mm512_loadu_si512(p.w[i] + c));
#pragma GCC unroll 8
    for (size_t j = 0; j < T; ++j) {
      const __m512bh xv = as_bh(_mm512_loadu_si512(p.x[j] + c));
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], wv[i], xv);
    }
  }

  // The row's last columns: zero-filled lanes add +0 products.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void last_step(const Pointers<R, T>& p, size_t n, size_t c1, Vec (&acc)[T][R]) {
    const size_t c = n * kStep;
    const __mmask32 m = tail_mask32(c1 - c);
    __m512bh wv[R];
    for (size_t i = 0; i < R; ++i) wv[i] = as_bh(_mm512_maskz_loadu_epi16(m, p.w[i] + c));
    for (size_t j = 0; j < T; ++j) {
      const __m512bh xv = as_bh(_mm512_maskz_loadu_epi16(m, p.x[j] + c));
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], wv[i], xv);
    }
  }

  static KVS_ALWAYS_INLINE Vec zero() { return _mm512_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  template <size_t N>
  static KVS_ALWAYS_INLINE void reduce(const Vec* acc, float* sums) {
    reduce_sums<N>(acc, sums);
  }
};

}  // namespace

void matmul_bf16dot_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  tiling::run(Bf16DotKernel{op, op.w.row_bytes()}, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace kvs::detail
