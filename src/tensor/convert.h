// Row conversion between fp32 and every weight DType (the reference layouts of quant blocks).
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace kvs {

// dst[0..n) = values of the n-element row at src; n a multiple of the type's block size.
void dequantize_row(DType type, const std::byte* src, float* dst, size_t n);
// Writes dtype_row_bytes(type, n) bytes at dst encoding src[0..n).
void quantize_row(DType type, const float* src, std::byte* dst, size_t n);

}  // namespace kvs
