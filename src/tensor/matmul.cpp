// Dispatch and the scalar reference path. SIMD paths live in matmul_avx2.cpp / matmul_avx512.cpp.
#include "tensor/matmul.h"

#include <vector>

#include "core/status.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

// Scalar reference: dequantize one weight row, dot it with every token's activations.
void matmul_rows_scalar(const WeightView& w, std::span<const float> x, size_t n_tokens,
                        std::span<float> y, size_t row_begin, size_t row_end) {
  std::vector<float> row(w.cols);
  for (size_t r = row_begin; r < row_end; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    for (size_t t = 0; t < n_tokens; ++t) {
      const float* xt = x.data() + t * w.cols;
      float acc = 0.0f;
      for (size_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
      y[t * w.rows + r] = acc;
    }
  }
}

}  // namespace

void matmul_rows(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
                 size_t row_begin, size_t row_end, Isa isa) {
  KVS_ASSERT(x.size() >= n_tokens * w.cols && y.size() >= n_tokens * w.rows,
             "matmul: x has {} floats (need {}), y has {} (need {})", x.size(), n_tokens * w.cols,
             y.size(), n_tokens * w.rows);
  (void)isa;
  matmul_rows_scalar(w, x, n_tokens, y, row_begin, row_end);
}

void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            ThreadPool& pool, Isa isa) {
  pool.parallel_for(w.rows, 16, [&](size_t begin, size_t end) {
    matmul_rows(w, x, n_tokens, y, begin, end, isa);
  });
}

}  // namespace kvs
