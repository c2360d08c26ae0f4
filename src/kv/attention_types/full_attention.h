// Full attention: every layer of the group reads the whole context, so a cached prefix is a chain of whole blocks,
// each confirmed by its parent and its own tokens, going on into the host tier's blocks, then a partial block (from
// the pool's index, or kept in the host tier by a swap). Only a sequence's own window skips blocks.
#pragma once

#include "kv/attention_types/kv_attention_type.h"

namespace kvs {

class FullAttention final : public KvAttentionType {
 public:
  size_t layer_window() const override { return 0; }
  size_t blocks_skipped(size_t position, size_t sequence_window, size_t block_size) const override {
    return blocks_before_window(position, sequence_window, block_size);
  }
  PrefixMatch longest_cached_prefix(const PrefixLookup& lookup) const override;
};

}  // namespace kvs
