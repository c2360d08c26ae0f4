// A view of one head-block of cached K or V: rows of `width` elements of `type`, back to back (the
// width is the reader's to know), and for the quantized types where their scales lie. What the KV
// storage hands out and the attention kernels read.
//
// Quantized elements are unsigned integers q (int8: 0..255, int4: 0..15) standing for min + scale * q,
// with an fp16 scale and an fp16 min per group, planar (all scales of a set, then all its mins):
//   per channel: groups of `group_size` consecutive rows; per group [width] scales then [width] mins
//   per token:   groups of `group_size` consecutive elements of a row; per row [width / group_size]
//                scales then as many mins
// int4 packs two elements a byte: each row is cut into chunks of 32 elements (the last may be shorter,
// n elements, n even), and byte j of a chunk holds element j in its low nibble and element j + n / 2 in
// its high nibble, so one 16-byte load unpacks into two runs of 16 consecutive elements.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kv_dtype.h"

namespace kvs {

inline constexpr size_t kKvInt4Chunk = 32;  // elements a chunk of an int4 row

struct KvRows {
  const void* data = nullptr;
  KvDType type = KvDType::kF32;
  const uint16_t* scales = nullptr;  // quantized: the fp16 scales and mins, as above
  KvScaleAxis axis = KvScaleAxis::kNone;
  size_t group_size = 0;  // rows (per channel) or elements (per token) sharing a pair
  bool rotated = false;   // keys stored as H k (H the normalized Hadamard matrix): read them with H q
};

}  // namespace kvs
