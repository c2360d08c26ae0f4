// Element-wise and small vector kernels of the Llama forward pass.
#pragma once

#include <cstddef>
#include <span>

#include "tensor/isa.h"

namespace kvs {

float dot_f32(const float* a, const float* b, size_t n, Isa isa = best_isa());
// y += a * x
void axpy_f32(float a, const float* x, float* y, size_t n, Isa isa = best_isa());

// out = x / rms(x) * weight; out may alias x.
void rmsnorm(std::span<float> out, std::span<const float> x, std::span<const float> weight, float eps,
             Isa isa = best_isa());

// In place, over `n_heads` heads of `head_dim` each laid out back to back: rotates adjacent pairs
// (2i, 2i+1) for 2i < rope_dim by pos * base^(-2i/rope_dim) (GGUF "llama" / llama2.c convention).
void rope_interleaved(std::span<float> heads, size_t n_heads, size_t head_dim, size_t rope_dim,
                      size_t pos, float freq_base);

// In place: x = exp(x - max) / sum.
void softmax(std::span<float> x, Isa isa = best_isa());

// gate[i] = silu(gate[i]) * up[i].
void swiglu(std::span<float> gate, std::span<const float> up, Isa isa = best_isa());

}  // namespace kvs
