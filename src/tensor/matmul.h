// Products of a weight matrix with activations: the hot path of prefill and decode.
//
// Every Isa computes the same product; they differ in how the activations are rounded (see
// MatmulActivations): Isa::kScalar is the fp32 reference.
#pragma once

#include <cstddef>
#include <span>

#include "core/aligned_buffer.h"
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

// The form depends on the weight type and the Isa only, never on the number of tokens (batch invariance,
// below). BF16 weights take the bf16 dot product wherever the CPU has AVX512_BF16, decode included: it
// streams the same bytes as the fp32 path in decode and is about twice as fast in prefill; the price is x
// rounded to bf16 in decode too (as llama.cpp does for bf16 weights).
MatmulActivations matmul_activations(DType weight_type, Isa isa);
// The same; n_tokens is ignored (kept for callers written when decode and prefill could differ).
MatmulActivations matmul_activations(DType weight_type, size_t n_tokens, Isa isa);

// Batch invariance. For a given Isa (and CPU), y[t][r] is a function of w's row r and x's token t only:
// bitwise the same whatever n_tokens is, whatever the other tokens hold, wherever token t sits in the
// batch, however the rows are split (ThreadPool size, matmul_rows ranges), and whether it comes from
// matmul, matmul_quantized (with activations quantized by the same Isa; except Isa::kScalar, where
// matmul is the fp32 reference and matmul_quantized the integer one) or matmul_rows. So a request
// decodes to the same tokens alone or batched with others, and with or without the KV cache.
// How: activation conversion is per token; every (row, token) dot product runs one canonical sequence of
// fp32 operations (segments of fixed columns, one accumulator per segment, a fixed horizontal reduction,
// segment sums added in order: matmul_tiling.h), which the decode kernel and every register tile of the
// prefill kernel follow exactly; tiles only choose which such sequences run side by side.
// Different Isas (and the scalar reference) may differ from each other in the last bits.

// Reusable buffers for converted activations. One per forward pass (per thread calling matmul) avoids an
// allocation per call.
struct MatmulScratch {
  QuantizedActivations int8;
  Bf16Activations bf16;
  AlignedBuffer<float> x_tiles;      // prefill over F16/BF16 panels: the activations tiled (tensor/float_panels.h)
  AlignedBuffer<uint16_t> xb_tiles;  // the same in bf16 for the bf16 dot products
};

// y[t][r] = sum_c w[r][c] * x[t][c] for t in [0, n_tokens), r in [0, w.rows).
// x: [n_tokens][w.cols] fp32, y: [n_tokens][w.rows] fp32. n_tokens == 1 is decode (matrix-vector).
// Activations are converted once per call, then the work is split over the pool's threads by output rows.
void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y, ThreadPool& pool,
            Isa isa = best_isa());
void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y, ThreadPool& pool,
            MatmulScratch& scratch, Isa isa = best_isa());

// Q8_0/Q4_0/K-quant weights with activations quantized beforehand (quantize_activations), so one quantization
// can feed several matrices. y: [xq.n_tokens][w.rows]. Isa::kScalar runs the portable integer reference.
void matmul_quantized(const WeightView& w, const QuantizedActivations& xq, std::span<float> y, ThreadPool& pool,
                      Isa isa = best_isa());

// Several matrices in one pass of the pool: each thread takes its share of every matrix's rows back to back,
// with no barrier between the matrices. Every y is bitwise what matmul_quantized gives. The matrices read the
// same quantized activations (Q, K and V; gate and up) or each its own (a mixture's experts, each over the
// tokens routed to it).
struct QuantizedMatmul {
  const WeightView* w;
  std::span<float> y;                        // [activations' n_tokens][w->rows]
  const QuantizedActivations* xq = nullptr;  // its own activations; nullptr: the group's
};
void matmul_quantized_group(std::span<const QuantizedMatmul> items, const QuantizedActivations& xq, ThreadPool& pool,
                            Isa isa = best_isa());
// Every item with its own activations.
void matmul_quantized_group(std::span<const QuantizedMatmul> items, ThreadPool& pool, Isa isa = best_isa());

// Single-threaded, for output rows [row_begin, row_end) only. Converts the activations itself on each
// call (matmul() does that once for all threads).
void matmul_rows(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y, size_t row_begin,
                 size_t row_end, Isa isa);

}  // namespace kvs
