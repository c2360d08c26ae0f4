// A borrowed 2-D weight matrix [rows][cols] in any DType. Row-major by default (ggml order: a GGUF
// tensor with dims {cols, rows}): rows are contiguous, quantized rows are sequences of blocks. Block-quantized
// weights (is_block_quantized) may instead be repacked for the int8 dot-product kernels (tensor/packed_weights.h),
// whose rows are interleaved in groups of 8 or 16 and cannot be read one at a time; F16 and BF16 weights may be
// repacked in panels of 8 or 16 rows for the float kernels (tensor/float_panels.h), the same layout names.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kvs {

enum class WeightLayout : uint8_t {
  kRows,       // row-major
  kPackedX16,  // repacked in groups of 16 rows for AVX-512 (VNNI): PackedLayout (tensor/packed_weights.h) or,
               // F16/BF16, FloatPanelLayout (tensor/float_panels.h)
  kPackedX8,   // in groups of 8 rows for AVX2 / AVX-VNNI
};

inline bool is_packed(WeightLayout layout) { return layout != WeightLayout::kRows; }
const char* weight_layout_name(WeightLayout layout);  // "rows", "packed x16", "packed x8"

struct WeightView {
  DType type = DType::kF32;
  const std::byte* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  WeightLayout layout = WeightLayout::kRows;

  // Row access: kRows layout only.
  size_t row_bytes() const { return dtype_row_bytes(type, cols); }
  const std::byte* row(size_t r) const { return data + r * row_bytes(); }
  // Bytes of the whole matrix as stored (what one pass over it reads).
  size_t bytes() const;
};

}  // namespace kvs
