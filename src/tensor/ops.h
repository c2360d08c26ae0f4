// Element-wise and small vector kernels of the Llama forward pass. Isa::kScalar is the reference; the
// SIMD paths agree with it to about 1e-6 relative (exp has ~2e-7 relative error; sums are reordered).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

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
void rope_interleaved(std::span<float> heads, size_t n_heads, size_t head_dim, size_t rope_dim, size_t pos,
                      float freq_base);

// The same rotation in three steps, so nothing is recomputed per layer or per call:
// inv_freq[i] = base^(-2i/rope_dim) for i < rope_dim / 2 (once per model),
std::vector<float> rope_inverse_frequencies(size_t rope_dim, float freq_base);
// cos[i], sin[i] of pos * inv_freq[i] (once per token position, shared by all layers, q and k),
void rope_cos_sin(size_t pos, std::span<const float> inv_freq, std::span<float> cos, std::span<float> sin);
// and the rotation of pairs (2i, 2i+1) for i < cos.size() (rope_dim = 2 * cos.size()).
// Gives bit-identical results to the first form.
void rope_interleaved(std::span<float> heads, size_t n_heads, size_t head_dim, std::span<const float> cos,
                      std::span<const float> sin);

// The same angles in the NeoX convention (GGUF gemma3, qwen2, ...: weights not permuted by the converter):
// rotates pairs (i, i + rope_dim / 2) for i < rope_dim / 2 = cos.size().
void rope_neox(std::span<float> heads, size_t n_heads, size_t head_dim, std::span<const float> cos,
               std::span<const float> sin);

// In place: x = exp(x - max) / sum.
void softmax(std::span<float> x, Isa isa = best_isa());

// gate[i] = silu(gate[i]) * up[i].
void swiglu(std::span<float> gate, std::span<const float> up, Isa isa = best_isa());
// gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form (Gemma's "gelu_pytorch_tanh"):
// 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
void geglu(std::span<float> gate, std::span<const float> up, Isa isa = best_isa());

}  // namespace kvs
