// A sliding window: the group's layers read the last `window` positions, so the blocks wholly before the window of a
// sequence's next token are let go, and a cached prefix needs only the blocks the window of its first computed token
// reads: each found by its chained hash and confirmed by its own tokens (the blocks before it, which would confirm
// its parent, may be gone); the ones before are holes. No offload tiers (they hold chains from the first block).
#pragma once

#include "kv/attention_types/kv_attention_type.h"

namespace kvs {

class SlidingWindow final : public KvAttentionType {
 public:
  explicit SlidingWindow(size_t window) : window_(window) {}
  size_t layer_window() const override { return window_; }
  size_t blocks_skipped(size_t position, size_t sequence_window, size_t block_size) const override;
  PrefixMatch longest_cached_prefix(const PrefixLookup& lookup) const override;

 private:
  size_t window_;
};

}  // namespace kvs
