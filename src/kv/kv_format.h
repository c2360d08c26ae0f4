// The one description of how a KV cache lies in memory, derived from its spec: for K and for V (or
// MLA's single latent) the element type, the grouping of quantization scales and where they live,
// and the bytes of every piece. The sizing (`calc` and the pool budget), the storage, the write path
// and the attention kernels all read it, so none of them has its own idea of a layout.
//
// Each tensor of a layer is a pool of blocks; a block holds one head-block per head, back to back:
//   pool  [block][head] head-block
//   head-block = data:   [block_size rows][width elements]  (int4: two elements a byte, core/kv_rows.h)
//                scales: [scale_count] fp16 scales and as many mins (core/kv_rows.h), right after the
//                        data padded to 4 bytes (none for floats)
// so everything attention reads for one head of one block is one contiguous run of bytes.
//
// Quantized grouping: V per token over groups of 32 elements of a row (the whole row when its width is
// not a multiple of 32); K per channel over groups of up to 16 rows of a block (KIVI, the default), or
// per token as V. Keys may be stored rotated by a Hadamard transform (spreads outlier channels over all).
//
// Key tails: a per-channel group is quantized once, when its last row is written, from its rows in
// fp16; until then those rows wait in a key tail (kv/key_tail_table.h), [num_layers][num_heads]
// [group_size rows][width] fp16, which attention reads in place of the group's quantized rows. So a
// group's scales come from all its rows, never from the first few, and no row is requantized.
#pragma once

#include <cstddef>
#include <optional>

#include "core/kv_rows.h"
#include "kv/kv_cache_spec.h"

namespace kvs {

struct KvTensorFormat {
  KvDType element = KvDType::kF32;
  KvScaleAxis scale_axis = KvScaleAxis::kNone;
  size_t group_size = 0;   // rows (per channel) or elements of a row (per token) sharing a pair; 0 without
  size_t scale_bytes = 0;  // bytes of one group's (scale, min) pair (two fp16: 4); 0 without scales
  size_t width = 0;        // elements of one row: a head's key or value, or the latent
  size_t rows = 0;         // rows of a head-block: the block size in tokens
  bool rotated = false;    // stored as H x (keys under --kv-rotate-keys)

  size_t row_bytes() const { return width * kv_dtype_bits(element) / 8; }
  // The rows, padded to 4 bytes when scales follow (so they lie aligned).
  size_t data_bytes() const {
    return scale_axis == KvScaleAxis::kNone ? rows * row_bytes() : (rows * row_bytes() + 3) / 4 * 4;
  }
  size_t scale_count() const {
    if (scale_axis == KvScaleAxis::kPerChannel) return (rows + group_size - 1) / group_size * width;
    return scale_axis == KvScaleAxis::kPerToken ? rows * width / group_size : 0;
  }
  size_t scales_bytes() const { return scale_count() * scale_bytes; }
  // Rows that wait in a key tail when `filled` rows of a block (or positions of a sequence) are
  // written: those of the filling per-channel group, 0 when it is complete or the format has none.
  size_t tail_rows(size_t filled) const {
    return scale_axis == KvScaleAxis::kPerChannel && filled % rows != 0 ? filled % rows % group_size : 0;
  }
  // Everything of one head in one block; head-blocks lie this far apart.
  size_t head_block_bytes() const { return data_bytes() + scales_bytes(); }
};

struct KvFormat {
  size_t num_layers = 0;
  size_t num_heads = 0;                  // head-blocks per block of each tensor: KV heads, or 1 (MLA latent)
  KvTensorFormat k = {};                 // keys, or MLA's latent
  std::optional<KvTensorFormat> v = {};  // values; none for MLA, whose latent serves both

  // One layer's pool of `t` for one block: num_heads head-blocks.
  size_t pool_bytes_per_block(const KvTensorFormat& t) const { return num_heads * t.head_block_bytes(); }
  size_t data_bytes_per_block() const;    // all layers and tensors, elements only
  size_t scales_bytes_per_block() const;  // all layers and tensors, scales only
  bool has_key_tails() const { return k.scale_axis == KvScaleAxis::kPerChannel; }
  // One key tail: a group of fp16 rows per layer and head; 0 without per-channel keys.
  size_t key_tail_bytes() const { return has_key_tails() ? num_layers * num_heads * k.group_size * k.width * 2 : 0; }
};

// The layout of `spec`, which must be valid: quantized K grouped along spec.key_scale_axis, quantized
// V (and a latent) per token.
KvFormat kv_format(const KvCacheSpec& spec);

}  // namespace kvs
