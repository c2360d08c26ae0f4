// A borrowed 2-D weight matrix [rows][cols] in any DType, row-major (ggml order: a GGUF tensor
// with dims {cols, rows}). Rows are contiguous; quantized rows are sequences of blocks.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace kvs {

struct WeightView {
  DType type = DType::kF32;
  const std::byte* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;

  size_t row_bytes() const { return dtype_row_bytes(type, cols); }
  const std::byte* row(size_t r) const { return data + r * row_bytes(); }
};

}  // namespace kvs
