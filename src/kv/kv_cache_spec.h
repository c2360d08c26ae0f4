// What a KV cache must hold, per layer and token: the model's K/V shape (or MLA's latent), the
// element types of K and V, and the block size. kv_format() turns it into the byte layout that the
// sizing, the storage, the write path and the kernels read.
#pragma once

#include <cstddef>

#include "core/kv_dtype.h"
#include "core/status.h"

namespace kvs {

struct KvCacheSpec {
  size_t num_layers = 0;
  size_t num_kv_heads = 0;  // ignored for MLA
  size_t head_dim = 0;      // width of a key row; ignored for MLA
  size_t v_head_dim = 0;    // width of a value row; 0: the same as head_dim (MLA's expanded V is narrower)
  bool mla = false;         // cache a compressed latent instead of K and V
  size_t kv_lora_rank = 0;  // MLA latent width
  size_t rope_dim = 0;      // MLA decoupled RoPE key width
  KvDTypes dtype = {};      // element types of K and V (an MLA latent: dtype.k)
  // Quantized K: scales per channel (groups of 16 rows along tokens: KIVI's grouping, which keeps the
  // outlier channels of keys apart; a filling group waits in a 16-bit key tail and is quantized once it
  // is complete, so a prefill chunk that completes a group reads it quantized for all its tokens) or per
  // token (groups along the row, as V: each row on its own, so nothing depends on how a sequence was chunked).
  KvScaleAxis key_scale_axis = KvScaleAxis::kPerChannel;
  bool rotate_keys = false;  // store keys as H k, H the Hadamard transform (queries are rotated alike)
  size_t block_size = 16;    // tokens per block, a power of two in [1, 256] (any size when contiguous)
  bool contiguous = false;   // one block per sequence: the reference layout paged attention is tested against

  size_t value_width() const { return v_head_dim == 0 ? head_dim : v_head_dim; }
  Status validate() const;
};

}  // namespace kvs
