// The one description of how a KV cache lies in memory, derived from its spec: for K and for V (or
// MLA's single latent) the element type, the grouping of quantization scales and where they live,
// and the bytes of every piece. The sizing (`calc` and the pool budget), the storage, the write path
// and the attention kernels all read it, so none of them has its own idea of a layout.
//
// Each tensor of a layer is a pool of blocks; a block holds one head-block per head, back to back:
//   pool  [block][head] head-block
//   head-block = data:   [block_size rows][width elements]  (int4: two elements a byte, low nibble first)
//                scales: [scale_count] entries of scale_bytes, right after the data (none for floats)
// so everything attention reads for one head of one block is one contiguous run of bytes.
#pragma once

#include <cstddef>
#include <optional>

#include "kv/kv_cache_spec.h"

namespace kvs {

// Which elements share a quantization scale.
enum class KvScaleAxis {
  kNone,        // floating elements carry their own exponent
  kPerChannel,  // one scale per channel for each group of group_size rows: groups run along tokens (K: KIVI)
  kPerToken,    // one scale per row for each group of group_size channels: groups run along the row (V)
};

struct KvTensorFormat {
  KvDType element = KvDType::kF32;
  KvScaleAxis scale_axis = KvScaleAxis::kNone;
  size_t group_size = 0;   // elements sharing one scale, along the axis; 0 without scales
  size_t scale_bytes = 0;  // bytes of one group's scale (fp16: 2); 0 without scales
  size_t width = 0;        // elements of one row: a head's key or value, or the latent
  size_t rows = 0;         // rows of a head-block: the block size in tokens

  size_t row_bytes() const { return width * kv_dtype_bits(element) / 8; }
  size_t data_bytes() const { return rows * row_bytes(); }
  size_t scale_count() const { return group_size == 0 ? 0 : rows * width / group_size; }
  size_t scales_bytes() const { return scale_count() * scale_bytes; }
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
};

// The layout of `spec`, which must be valid. Quantized K is grouped per channel over the rows of a
// block, quantized V (and a latent) per token over the whole row, each group with one fp16 scale.
KvFormat kv_format(const KvCacheSpec& spec);

}  // namespace kvs
