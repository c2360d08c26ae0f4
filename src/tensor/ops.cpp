// Scalar reference implementations of the small kernels.
#include "tensor/ops.h"

#include <algorithm>
#include <cmath>

namespace kvs {

float dot_f32(const float* a, const float* b, size_t n, Isa) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy_f32(float a, const float* x, float* y, size_t n, Isa) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void rmsnorm(std::span<float> out, std::span<const float> x, std::span<const float> weight, float eps, Isa) {
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / x.size()) + eps);
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * weight[i];
}

void rope_interleaved(std::span<float> heads, size_t n_heads, size_t head_dim, size_t rope_dim,
                      size_t pos, float freq_base) {
  for (size_t i = 0; i < rope_dim; i += 2) {
    const float freq = std::pow(freq_base, -static_cast<float>(i) / static_cast<float>(rope_dim));
    const float angle = static_cast<float>(pos) * freq;
    const float c = std::cos(angle), s = std::sin(angle);
    for (size_t h = 0; h < n_heads; ++h) {
      float* v = heads.data() + h * head_dim + i;
      const float v0 = v[0], v1 = v[1];
      v[0] = v0 * c - v1 * s;
      v[1] = v0 * s + v1 * c;
    }
  }
}

void softmax(std::span<float> x, Isa) {
  if (x.empty()) return;
  const float max = *std::max_element(x.begin(), x.end());
  float sum = 0.0f;
  for (float& v : x) {
    v = std::exp(v - max);
    sum += v;
  }
  const float inv = 1.0f / sum;
  for (float& v : x) v *= inv;
}

void swiglu(std::span<float> gate, std::span<const float> up, Isa) {
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace kvs
