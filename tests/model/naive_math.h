// The double-precision arithmetic the naive reference forward passes (naive_gemma3_forward.h,
// naive_deepseek2_forward.h) are written in: one plain loop each, no blocking, no SIMD, nothing shared with the
// engine's kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/convert.h"

namespace kvs::testing::naive {

// Every tensor of the file as fp32 values, by name (stacked matrices row after row).
inline std::map<std::string, std::vector<float>> dequantized_tensors(const gguf::File& f) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : f.tensors()) {
    std::vector<float> values(t.num_elements());
    const size_t cols = t.dims[0], row_bytes = dtype_row_bytes(t.type, cols);
    for (size_t r = 0; r < values.size() / cols; ++r) {
      dequantize_row(t.type, t.data.data() + r * row_bytes, values.data() + r * cols, cols);
    }
    out[t.name] = std::move(values);
  }
  return out;
}

// out[r] = sum_c m[r][c] * in[c]; `rows` 0 means m.size() / in.size().
inline std::vector<double> matvec(const std::vector<float>& m, const std::vector<double>& in, size_t rows) {
  if (rows == 0) rows = m.size() / in.size();
  std::vector<double> out(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (size_t c = 0; c < in.size(); ++c) s += m[r * in.size() + c] * in[c];
    out[r] = s;
  }
  return out;
}

inline std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& weight, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * weight[i];
  return out;
}

inline void softmax(std::vector<double>& v) {
  const double max = *std::max_element(v.begin(), v.end());
  double sum = 0.0;
  for (double& e : v) sum += (e = std::exp(e - max));
  for (double& e : v) e /= sum;
}

inline void add(std::vector<double>& x, const std::vector<double>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace kvs::testing::naive
