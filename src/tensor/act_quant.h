// Activations converted once per matmul for the kernels: int8 blocks for Q8_0/Q4_0/K-quant weights, bf16 for
// BF16 weights in prefill. The same converted activations may feed several matrices (q/k/v, gate/up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "tensor/isa.h"

namespace kvs {

// x quantized per 32 values like llama.cpp's Q8_0, but with an fp32 scale:
// d = max|x| / 127, q = round_half_even(x * (1 / d)), |q| <= 127 (the same bits on every ISA).
// Layout: qs [n_tokens][cols], scales [n_tokens][cols / 32], offsets [n_tokens][cols / 32] with
// offsets = -128 * (sum of the block's qs): the exact correction for kernels that take the weights as
// unsigned bytes w + 128 (vpdpbusd on packed Q8_0), and group_sums [n_tokens][cols / 16] = the sum of each 16
// qs (|sum| <= 2032): the K-quant kernels' min and offset terms, whose scales are per 16 values.
struct QuantizedActivations {
  static constexpr size_t kBlock = 32;
  static constexpr size_t kGroup = 16;

  size_t n_tokens = 0;
  size_t cols = 0;
  AlignedBuffer<int8_t> qs;
  AlignedBuffer<float> scales;
  AlignedBuffer<int32_t> offsets;
  AlignedBuffer<int16_t> group_sums;

  size_t blocks_per_token() const { return cols / kBlock; }
  const int8_t* token_qs(size_t t) const { return qs.data() + t * cols; }
  const float* token_scales(size_t t) const { return scales.data() + t * blocks_per_token(); }
  const int32_t* token_offsets(size_t t) const { return offsets.data() + t * blocks_per_token(); }
  const int16_t* token_group_sums(size_t t) const { return group_sums.data() + t * (cols / kGroup); }
  // Sets the shape, reallocating only when the buffers are too small.
  void reshape(size_t tokens, size_t columns);
};

// x: [n_tokens][cols] with cols % 32 == 0. Splits tokens over the pool when n_tokens > 1.
void quantize_activations(std::span<const float> x, size_t n_tokens, size_t cols, QuantizedActivations& out,
                          ThreadPool& pool, Isa isa = best_isa());
// Single-threaded, tokens [t_begin, t_end) of an already reshaped `out`.
void quantize_activations_rows(std::span<const float> x, QuantizedActivations& out, size_t t_begin, size_t t_end,
                               Isa isa);

// dst's token `to` = src's token `from` (dst reshaped to src's cols beforehand): quantization is per token, so
// the rows of a subset of tokens quantized together are these copies of the whole batch's.
void copy_quantized_token(const QuantizedActivations& src, size_t from, QuantizedActivations& dst, size_t to);

// x rounded to bf16 (nearest even): [n_tokens][cols], for the vdpbf16ps prefill kernel.
struct Bf16Activations {
  size_t n_tokens = 0;
  size_t cols = 0;
  AlignedBuffer<uint16_t> values;

  const uint16_t* token(size_t t) const { return values.data() + t * cols; }
  void reshape(size_t tokens, size_t columns);
};

void convert_activations_bf16(std::span<const float> x, size_t n_tokens, size_t cols, Bf16Activations& out,
                              ThreadPool& pool, Isa isa = best_isa());

}  // namespace kvs
