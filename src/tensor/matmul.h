// Products of a weight matrix with activations: the hot path of prefill and decode.
//
// Every Isa computes the same product; they differ in how the activations are rounded (see
// MatmulActivations): Isa::kScalar is the fp32 reference.
#pragma once

#include <cstddef>
#include <span>

#include "core/thread_pool.h"
#include "tensor/act_quant.h"
#include "tensor/isa.h"
#include "tensor/weight_view.h"

namespace kvs {

// The form the activations take inside a matmul, which sets the error against the fp32 reference:
//   kF32:        exact inputs; only the fp32 summation order differs (|err| ~ 1e-6 * sum|w*x|).
//   kInt8Blocks: x quantized per 32 values (QuantizedActivations); |err| <= sum_c |w_c| * d_block(c) / 2
//                plus fp32 rounding (llama.cpp's q8_0 x q8_0 / q4_0 x q8_0 arithmetic).
//   kBf16:       x rounded to bf16 (vdpbf16ps); |err| <= 2^-8 * sum|w*x| plus fp32 rounding.
enum class MatmulActivations { kF32, kInt8Blocks, kBf16 };

// BF16 weights use the bf16 dot product (x rounded to bf16) from this many tokens on; decode stays exact.
inline constexpr size_t kBf16DotMinTokens = 4;

MatmulActivations matmul_activations(DType weight_type, size_t n_tokens, Isa isa);

// Reusable buffers for converted activations. One per forward pass (per thread calling matmul) avoids an
// allocation per call.
struct MatmulScratch {
  QuantizedActivations int8;
  Bf16Activations bf16;
};

// y[t][r] = sum_c w[r][c] * x[t][c] for t in [0, n_tokens), r in [0, w.rows).
// x: [n_tokens][w.cols] fp32, y: [n_tokens][w.rows] fp32. n_tokens == 1 is decode (matrix-vector).
// Activations are converted once per call, then the work is split over the pool's threads by output rows.
void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            ThreadPool& pool, Isa isa = best_isa());
void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            ThreadPool& pool, MatmulScratch& scratch, Isa isa = best_isa());

// Q8_0/Q4_0 weights with activations quantized beforehand (quantize_activations), so one quantization
// can feed several matrices. y: [xq.n_tokens][w.rows]. Isa::kScalar runs the portable integer reference.
void matmul_quantized(const WeightView& w, const QuantizedActivations& xq, std::span<float> y,
                      ThreadPool& pool, Isa isa = best_isa());

// Single-threaded, for output rows [row_begin, row_end) only. Converts the activations itself on each
// call (matmul() does that once for all threads).
void matmul_rows(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
                 size_t row_begin, size_t row_end, Isa isa);

}  // namespace kvs
