// Dispatch and the scalar reference implementations of the small kernels (rope is in rope.cpp).
#include "tensor/ops.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "tensor/ops_internal.h"

namespace kvs {

float dot_f32(const float* a, const float* b, size_t n, Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return detail::dot_f32_avx512(a, b, n);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::dot_f32_avx2(a, b, n);
    case Isa::kScalar: break;
  }
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy_f32(float a, const float* x, float* y, size_t n, Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return detail::axpy_f32_avx512(a, x, y, n);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::axpy_f32_avx2(a, x, y, n);
    case Isa::kScalar: break;
  }
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void rmsnorm(std::span<float> out, std::span<const float> x, std::span<const float> weight, float eps, Isa isa) {
  KVS_ASSERT(out.size() >= x.size() && weight.size() >= x.size(), "rmsnorm: x has {} values, out {}, weight {}",
             x.size(), out.size(), weight.size());
  double ss = 0.0;
  switch (isa) {
    case Isa::kAvx512: ss = detail::sum_squares_avx512(x.data(), x.size()); break;
    case Isa::kAvxVnni:
    case Isa::kAvx2: ss = detail::sum_squares_avx2(x.data(), x.size()); break;
    case Isa::kScalar:
      for (float v : x) ss += static_cast<double>(v) * v;
      break;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / x.size()) + eps);
  switch (isa) {
    case Isa::kAvx512: return detail::scale_mul_avx512(out.data(), x.data(), weight.data(), scale, x.size());
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::scale_mul_avx2(out.data(), x.data(), weight.data(), scale, x.size());
    case Isa::kScalar: break;
  }
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * weight[i];
}

void softmax(std::span<float> x, Isa isa) {
  if (x.empty()) return;
  switch (isa) {
    case Isa::kAvx512: return detail::softmax_avx512(x.data(), x.size());
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::softmax_avx2(x.data(), x.size());
    case Isa::kScalar: break;
  }
  const float max = *std::max_element(x.begin(), x.end());
  float sum = 0.0f;
  for (float& v : x) {
    v = std::exp(v - max);
    sum += v;
  }
  const float inv = 1.0f / sum;
  for (float& v : x) v *= inv;
}

void swiglu(std::span<float> gate, std::span<const float> up, Isa isa) {
  KVS_ASSERT(up.size() >= gate.size(), "swiglu: gate has {} values, up {}", gate.size(), up.size());
  switch (isa) {
    case Isa::kAvx512: return detail::swiglu_avx512(gate.data(), up.data(), gate.size());
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::swiglu_avx2(gate.data(), up.data(), gate.size());
    case Isa::kScalar: break;
  }
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu(std::span<float> gate, std::span<const float> up, Isa isa) {
  KVS_ASSERT(up.size() >= gate.size(), "geglu: gate has {} values, up {}", gate.size(), up.size());
  switch (isa) {
    case Isa::kAvx512: return detail::geglu_avx512(gate.data(), up.data(), gate.size());
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::geglu_avx2(gate.data(), up.data(), gate.size());
    case Isa::kScalar: break;
  }
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(g * (detail::kGeluA + detail::kGeluB * g * g))) * up[i];
  }
}

}  // namespace kvs
