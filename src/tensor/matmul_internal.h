// Per-ISA, per-weight-type matmul kernels behind matmul.cpp's dispatch (not for callers outside
// src/tensor). Each computes output rows [row_begin, row_end) for all tokens, single-threaded.
#pragma once

#include <cstddef>

#include "tensor/act_quant.h"
#include "tensor/weight_view.h"

namespace kvs::detail {

// y[t][r] = sum_c w[r][c] * x[t][c]. Exactly one activation form is used per weight type and path:
// x (fp32) for F32/F16/BF16 weights, xq for Q8_0/Q4_0/K-quants, xb for BF16 weights on the bf16-dot path.
struct MatmulOperands {
  WeightView w;
  size_t n_tokens = 0;
  const float* x = nullptr;  // [n_tokens][w.cols]
  const QuantizedActivations* xq = nullptr;
  const Bf16Activations* xb = nullptr;
  // Float panel weights in prefill (n_tokens > 1): x, or xb's values, tiled (tensor/float_panels.h).
  const float* x_tiles = nullptr;
  const uint16_t* xb_tiles = nullptr;
  float* y = nullptr;  // [n_tokens][w.rows]
};

using MatmulRowsFn = void (*)(const MatmulOperands&, size_t row_begin, size_t row_end);

void matmul_f32_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_f16_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_bf16_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_q8_0_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_q4_0_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_kquant_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);  // Q2_K..Q6_K

void matmul_f32_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_f16_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_bf16_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);     // fp32 x
void matmul_bf16dot_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);  // bf16 xb, needs BF16
void matmul_q8_0_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);     // needs VNNI
void matmul_q4_0_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);     // needs VNNI
void matmul_kquant_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);   // Q2_K..Q6_K, needs BW
// The kernels over packed weights of `type` (tensor/packed_weights.h, packed_matmul_impl.h), nullptr when `type` is
// not packable: row_begin a multiple of the group rows G, row_end too or w.rows. G = 16 (kPackedX16) needs AVX-512
// VNNI; G = 8 (kPackedX8) AVX2, with the VEX vpdpbusd in the avxvnni kernels.
MatmulRowsFn packed_kernel_avx512(DType type);
MatmulRowsFn packed_kernel_avx2(DType type);
MatmulRowsFn packed_kernel_avxvnni(DType type);

// The float panel kernels (tensor/float_panels.h, panel_matmul_impl.h): F16 and BF16 weights packed in panels of 16
// rows (avx512) or 8 (avx2); row_begin a multiple of the panel rows. bf16dot takes xb and needs AVX512_BF16.
void matmul_f16_panels_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_bf16_panels_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_bf16dot_panels_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_f16_panels_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);
void matmul_bf16_panels_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end);

// Portable reference for the quantized-activation path: the same integer arithmetic as the SIMD
// kernels (exact block dot products), fp32 accumulation of the scaled blocks.
void matmul_quantized_scalar(const MatmulOperands& op, size_t row_begin, size_t row_end);

}  // namespace kvs::detail
