// AVX-512 BF16 matmul for prefill: vdpbf16ps on bf16 weights and bf16-rounded activations (xb), 32
// products per instruction, twice the fp32 FMA rate. Needs AVX512_BF16 (cpu_has_avx512_bf16()).
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

KVS_ALWAYS_INLINE __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

struct Bf16DotKernel {
  static constexpr size_t kRowTile = 4;
  static constexpr size_t kDecodeRowTile = 8;
  static constexpr size_t kMaxTokens = 6;    // 4 x 6 accumulators + 4 weight vectors of 32 registers
  static constexpr size_t kColChunk = 2048;  // 6 tokens x 4 KiB of bf16 activations stay in L1

  const MatmulOperands& op;
  size_t row_stride;  // bytes

  template <size_t R, size_t T>
  void tile(size_t r0, size_t t0, size_t c0, size_t c1, bool first) const {
    const uint16_t* w[R];
    const uint16_t* x[T];
    for (size_t i = 0; i < R; ++i) w[i] = reinterpret_cast<const uint16_t*>(op.w.data + (r0 + i) * row_stride);
    for (size_t j = 0; j < T; ++j) x[j] = op.xb->values.data() + (t0 + j) * op.w.cols;
    __m512 acc[T][R];
    for (size_t j = 0; j < T; ++j)
      for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_setzero_ps();
    size_t c = c0;
    for (; c + 32 <= c1; c += 32) {
      __m512bh wv[R];
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) wv[i] = as_bh(_mm512_loadu_si512(w[i] + c));
#pragma GCC unroll 8
      for (size_t j = 0; j < T; ++j) {
        const __m512bh xv = as_bh(_mm512_loadu_si512(x[j] + c));
#pragma GCC unroll 8
        for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], wv[i], xv);
      }
    }
    if (c < c1) {
      const __mmask32 m = tail_mask32(c1 - c);
      __m512bh wv[R];
      for (size_t i = 0; i < R; ++i) wv[i] = as_bh(_mm512_maskz_loadu_epi16(m, w[i] + c));
      for (size_t j = 0; j < T; ++j) {
        const __m512bh xv = as_bh(_mm512_maskz_loadu_epi16(m, x[j] + c));
        for (size_t i = 0; i < R; ++i) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], wv[i], xv);
      }
    }
    for (size_t j = 0; j < T; ++j) store_row_sums<R>(acc[j], op.y + (t0 + j) * op.w.rows + r0, first);
  }
};

}  // namespace

void matmul_bf16dot_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  tiling::run(Bf16DotKernel{op, op.w.row_bytes()}, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace kvs::detail
