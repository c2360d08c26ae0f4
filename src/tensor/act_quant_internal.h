// Per-ISA activation conversions behind act_quant.cpp's dispatch. Every version gives bit-identical
// results to the scalar one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvs::detail {

// n_blocks blocks of 32 values: qs[32 * b + j] = round(x[32 * b + j] / scales[b]), scales[b] = max|x| / 127,
// offsets[b] = -128 * (qs[32 * b] + ... + qs[32 * b + 31]).
void quantize_blocks_scalar(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets);
void quantize_blocks_avx2(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets);
void quantize_blocks_avx512(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets);

// out[i] = fp32_to_bf16(x[i]) (nearest even, nan stays nan).
void to_bf16_scalar(const float* x, size_t n, uint16_t* out);
void to_bf16_avx2(const float* x, size_t n, uint16_t* out);
void to_bf16_avx512(const float* x, size_t n, uint16_t* out);

}  // namespace kvs::detail
