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

// The packed 6-bit scales, one at a time: the single definition of their bit layout, for the decoder below and the
// SIMD kernels. Internal linkage: each kernel file gets its own copy compiled with its own flags (an inline function
// with external linkage could reach a scalar caller as the copy the linker kept from an AVX2 file).
namespace {

// Q4_K/Q5_K (core/dtype.h): sub-block j's scale and min from the 12 bytes `p`.
inline void k_scale_min(const uint8_t* p, size_t j, int& sc, int& m) {
  if (j < 4) {
    sc = p[j] & 63;
    m = p[j + 4] & 63;
  } else {
    sc = (p[j + 4] & 15) | ((p[j - 4] >> 6) << 4);
    m = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

// Q3_K: 16-value group g's raw 6-bit scale (0..63; the scale is raw - 32) from the 12 bytes `s`.
inline int q3_k_raw_scale(const uint8_t* s, size_t g) {
  const size_t k = g % 4;
  switch (g / 4) {
    case 0: return (s[k] & 15) | ((s[8 + k] & 3) << 4);
    case 1: return (s[4 + k] & 15) | (((s[8 + k] >> 2) & 3) << 4);
    case 2: return (s[k] >> 4) | (((s[8 + k] >> 4) & 3) << 4);
    default: return (s[4 + k] >> 4) | (((s[8 + k] >> 6) & 3) << 4);
  }
}

}  // namespace

// Q4_K/Q5_K's 12 bytes of packed 6-bit scales: sc[j], m[j] for the 8 sub-blocks.
void unpack_k_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]);
// The inverse: sc[j], m[j] (0..63) into the 12 bytes.
void pack_k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t* packed);
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
