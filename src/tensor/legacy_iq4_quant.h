// Row conversion for ggml's other 4- and 5-bit types, as llama.cpp's quantizer writes them: Q4_1, Q5_0 and Q5_1 (32
// values a block, with a min or a fifth bit) and the non-linear IQ4_NL and IQ4_XS (kIq4Grid); layouts in core/dtype.h.
// The blocks' fields as stored (for the packer, tensor/packed_weights.h) and as exact integers (for the reference
// matmul over int8 activations).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kvs {

bool is_legacy_or_iq4(DType type);  // Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS
// dst[0..n) = the values of n elements at src (n whole blocks of `type`).
void dequantize_legacy_iq4_row(DType type, const std::byte* src, float* dst, size_t n);
// Encodes src[0..n) as `type` (round to nearest; IQ4 scales chosen by a search that minimizes the squared error).
void quantize_legacy_iq4_row(DType type, const float* src, std::byte* dst, size_t n);

// One 32-value block of Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL as stored: the fp16 scale d, the fp16 min m (Q4_1, Q5_1;
// else 0) and the levels (0..15; Q5_0, Q5_1: 0..31, the fifth bit at bit 4). Value j: Q4_0 d (level - 8), Q5_0
// d (level - 16), Q4_1 and Q5_1 d level + m, IQ4_NL d kIq4Grid[level].
struct BlockLevels32 {
  uint16_t d = 0, m = 0;
  uint8_t levels[32] = {};
};
bool has_block_levels32(DType type);  // Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
bool has_block_min(DType type);       // Q4_1, Q5_1 (and Q4_K, Q5_K: per sub-block)
// Block b of a row of `type` (has_block_levels32), read or written field by field.
BlockLevels32 read_block_levels32(DType type, const std::byte* row, size_t b);
void write_block_levels32(DType type, const BlockLevels32& f, std::byte* row, size_t b);

// One IQ4_XS super-block as stored: the fp16 scale d, the 8 sub-block scales as signed multiples ls - 32 (-32..31)
// and the 256 grid indices (value d (ls_j - 32) kIq4Grid[level], j = element / 32).
struct Iq4XsLevels {
  uint16_t d = 0;
  int8_t scales[8] = {};
  uint8_t levels[256] = {};
};
Iq4XsLevels read_iq4_xs_levels(const std::byte* block);
void write_iq4_xs_levels(const Iq4XsLevels& f, std::byte* block);

// Block b (32 values) of a row of `type` (is_legacy_or_iq4) as integers: value j = d q[j] + m, with d and m exact in
// fp32 (IQ4_XS: d = the fp16 scale times ls - 32, 17 significant bits at most).
struct BlockInts32 {
  float d = 0.0f, m = 0.0f;
  int8_t q[32] = {};
};
BlockInts32 block_ints32(DType type, const std::byte* row, size_t b);

}  // namespace kvs
