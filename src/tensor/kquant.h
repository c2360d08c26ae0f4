// K-quant super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; layouts in core/dtype.h): every format decoded into one
// integer form, rows dequantized exactly as the format defines them, and rows quantized for the writers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kvs {

// A super-block in integers: value i = (d * scale[i / 16]) * q[i] - (dmin * min[i / 16]), the format's own
// arithmetic (Q4_K and Q5_K give both 16-value halves of a 32-value sub-block the same scale and min; Q6_K and
// Q3_K have no min: dmin = 0, min = 0). q is unsigned (0..15 / 0..31 / 0..3) for the types with a min and signed
// (-32..31 / -4..3) for the others.
struct KBlockInts {
  float d = 0.0f;
  float dmin = 0.0f;
  int16_t scale[16] = {};
  int16_t min[16] = {};
  int8_t q[kSuperBlock] = {};
};

// Q4_K/Q5_K's 12 bytes of packed 6-bit scales: sc[j], m[j] for the 8 sub-blocks.
void unpack_k_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]);
// Q3_K's 12 bytes of packed 6-bit scales: the 16 raw values (0..63; the scale is raw - 32).
void unpack_q3_k_scales(const uint8_t* packed, uint8_t raw[16]);

// One block of `type` (a K-quant) at `block`.
KBlockInts decode_k_block(DType type, const std::byte* block);

// dst[0..n) = the n values (n a multiple of 256) of a row of K-quant blocks.
void dequantize_k_row(DType type, const std::byte* src, float* dst, size_t n);
// The row src[0..n) as K-quant blocks: per sub-block a scale (and min) fitted by least squares over a few
// candidate grids, the scales quantized against the super-block's, then every value rounded on its final grid.
void quantize_k_row(DType type, const float* src, std::byte* dst, size_t n);

}  // namespace kvs
