// Row conversion for ggml's other 4- and 5-bit types, as llama.cpp's quantizer writes them: Q4_1, Q5_0 and Q5_1 (32
// values a block, with a min or a fifth bit) and the non-linear IQ4_NL and IQ4_XS (kIq4Grid); layouts in core/dtype.h.
// Matrices of Q5_0 and IQ4_NL are transcoded to Q8_0 exactly (the same scale, their integer levels as int8) to run on
// the Q8_0 kernels; the others go through dequantize_row.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace kvs {

bool is_legacy_or_iq4(DType type);  // Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS
// dst[0..n) = the values of n elements at src (n whole blocks of `type`).
void dequantize_legacy_iq4_row(DType type, const std::byte* src, float* dst, size_t n);
// Encodes src[0..n) as `type` (round to nearest; IQ4 scales chosen by a search that minimizes the squared error).
void quantize_legacy_iq4_row(DType type, const float* src, std::byte* dst, size_t n);

// Whether a row of `type` is a row of Q8_0 blocks with the same values (Q5_0, IQ4_NL).
bool transcodes_to_q8_0(DType type);
// Writes the n elements at src (of a type that transcodes_to_q8_0) as n / 32 Q8_0 blocks: the same values, bit for bit.
void transcode_row_to_q8_0(DType type, const std::byte* src, BlockQ8_0* dst, size_t n);

}  // namespace kvs
