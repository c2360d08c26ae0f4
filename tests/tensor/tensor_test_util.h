// Random weights and activations for the kernel tests, and the exact (fp64) products they are checked
// against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "tensor/convert.h"
#include "tensor/weight_view.h"

namespace kvs::test {

// A weight matrix encoded in `type` from uniform [-1, 1) values, with its decoded values.
struct TestMatrix {
  DType type = DType::kF32;
  size_t rows = 0;
  size_t cols = 0;
  std::vector<std::byte> data;
  std::vector<float> values;  // [rows][cols], the decoded weights

  WeightView view() const { return {.type = type, .data = data.data(), .rows = rows, .cols = cols}; }
};

inline TestMatrix make_matrix(DType type, size_t rows, size_t cols, std::mt19937& rng) {
  TestMatrix m{.type = type, .rows = rows, .cols = cols, .data = {}, .values = {}};
  const size_t row_bytes = dtype_row_bytes(type, cols);
  m.data.resize(rows * row_bytes);
  m.values.resize(rows * cols);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    for (float& v : row) v = u(rng);
    quantize_row(type, row.data(), m.data.data() + r * row_bytes, cols);
    dequantize_row(type, m.data.data() + r * row_bytes, m.values.data() + r * cols, cols);
  }
  return m;
}

// [n][cols] activations: uniform [-1, 1) times a random scale in [0.1, 10] per 32 values, so quantization
// blocks differ in range.
inline std::vector<float> make_activations(size_t n, size_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-1.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (size_t i = 0; i < x.size(); i += 32) {
    const float scale = std::pow(10.0f, e(rng));
    for (size_t j = i; j < std::min(x.size(), i + 32); ++j) x[j] = u(rng) * scale;
  }
  return x;
}

// Exact y[t][r] = sum_c w[r][c] x[t][c] in fp64 and abs[t][r] = sum_c |w[r][c] x[t][c]|.
struct ExactProduct {
  std::vector<double> y;
  std::vector<double> abs;
};

inline ExactProduct exact_product(const TestMatrix& w, const std::vector<float>& x, size_t n) {
  ExactProduct p{std::vector<double>(n * w.rows), std::vector<double>(n * w.rows)};
  for (size_t t = 0; t < n; ++t) {
    for (size_t r = 0; r < w.rows; ++r) {
      double s = 0.0, a = 0.0;
      for (size_t c = 0; c < w.cols; ++c) {
        const double v = static_cast<double>(w.values[r * w.cols + c]) * x[t * w.cols + c];
        s += v;
        a += std::fabs(v);
      }
      p.y[t * w.rows + r] = s;
      p.abs[t * w.rows + r] = a;
    }
  }
  return p;
}

}  // namespace kvs::test
