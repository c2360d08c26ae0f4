// Quantized K/V rows (the layout is core/kv_rows.h): the write path's quantizers, the element reader
// every attention kernel is tested against, and the Hadamard transform of rotated keys. Scalar code:
// a row is quantized once, when it is written; the hot loops are the fused attention kernels.
//
// Error bound: a value x in its group's range quantizes to min + scale * q with |error| <= scale / 2
// (up to fp32 rounding), where scale = (hi - lo) / levels over the group's range [lo, hi], rounded up
// to fp16, and min is lo rounded down to fp16. A per-channel group is quantized once, from its rows
// in fp16 (the key tail they waited in), so its error is that of the fp16 rounding plus scale / 2.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kv_rows.h"

namespace kvs {

// The largest q of a quantized type: 255 (int8), 15 (int4).
uint32_t kv_quant_levels(KvDType type);

struct KvQuantPair {
  uint16_t scale = 0;  // fp16 bits
  uint16_t min = 0;    // fp16 bits
};
// The pair of a group whose values lie in [lo, hi] (finite, lo <= hi; clamped to the fp16 range):
// min <= lo and min + scale * levels >= hi, both as fp16.
KvQuantPair kv_quant_pair(float lo, float hi, uint32_t levels);
// q of x under a pair: round((x - min) / scale), clamped to [0, levels]; 0 when scale is 0.
uint32_t kv_quantize(float x, KvQuantPair pair, uint32_t levels);

// q of element i of a quantized row of `width` elements, and its store.
uint32_t kv_get_q(KvDType type, const uint8_t* row, size_t width, size_t i);
void kv_set_q(KvDType type, uint8_t* row, size_t width, size_t i, uint32_t q);

// Row x of `width` elements quantized per token: groups of `group_size` elements, each with its pair;
// `scales` is the row's set (width / group_size scales, then as many mins).
void quantize_row_per_token(KvDType type, const float* x, size_t width, size_t group_size, uint8_t* row,
                            uint16_t* scales);

// A whole per-channel group of `rows` rows (fp16, [rows][width]) quantized: each channel's pair over
// its rows' range into `scales` ([width] scales then [width] mins), the rows into `data` ([rows][width]).
void quantize_group_per_channel(KvDType type, const uint16_t* rows_f16, size_t rows, size_t width, uint8_t* data,
                                uint16_t* scales);

// Element i of row s of a head-block of `width`-element rows, any KV type, as fp32 (quantized:
// min + scale * q in fp32). The scalar reference of every attention kernel.
float kv_element(const KvRows& rows, size_t width, size_t s, size_t i);

// In place: x = H x, H the Walsh-Hadamard matrix of order n (a power of two) scaled by 1 / sqrt(n):
// orthogonal and symmetric, so H (H x) = x and (H q) . (H k) = q . k.
void hadamard_transform(float* x, size_t n);

}  // namespace kvs
