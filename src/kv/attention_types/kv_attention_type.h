// What one layer group's attention reads decides which of a sequence's cached blocks it still needs and which cached
// prefix it can take: the part of KV management that differs by attention type (vLLM v1's FullAttentionManager and
// SlidingWindowManager). A KvCacheManager (one per layer group, kv/hybrid_kv_manager.h) keeps the blocks, tables,
// prefix index, key tails and transfers, and asks its group's attention type these two questions:
//   blocks_skipped         the blocks of a sequence wholly before what its next token reads: let go, holes in its
//   table; longest_cached_prefix  the longest prefix of a prompt whose blocks that attention reads are cached.
// Windows, one name each: a layer window is what a group's layers read (the model's sliding window, or --kv-window
// forced on every layer); a sequence window is a request's own (RequestParams::kv_window), narrowing every group's for
// that sequence. Both let go of blocks by position. An eviction policy (kv/policies/) instead compacts the slots it
// keeps, and is not an attention type.
#pragma once

#include <cstddef>
#include <memory>

#include "kv/attention_types/prefix_lookup.h"
#include "kv/prefix_match.h"

namespace kvs {

class KvAttentionType {
 public:
  virtual ~KvAttentionType() = default;
  // > 0: the group's layers read the last layer_window() positions at most; 0: the whole context.
  virtual size_t layer_window() const = 0;
  // Blocks [0, this) of a sequence (blocks of `block_size` tokens) that a token at `position` does not read, under
  // the sequence's own window too (0: none).
  virtual size_t blocks_skipped(size_t position, size_t sequence_window, size_t block_size) const = 0;
  // The longest cached prefix of lookup.tokens: whole blocks (holes where the attention does not read them), then
  // blocks of the host tier and a partial block as the type allows.
  virtual PrefixMatch longest_cached_prefix(const PrefixLookup& lookup) const = 0;
};

// Full attention when layer_window is 0, else a sliding window of that many tokens.
std::unique_ptr<KvAttentionType> make_kv_attention_type(size_t layer_window);

// Blocks wholly before a window of `window` tokens (0: none) of a token at `position`: [0, this).
inline size_t blocks_before_window(size_t position, size_t window, size_t block_size) {
  return window == 0 || position + 1 <= window ? 0 : (position + 1 - window) / block_size;
}

}  // namespace kvs
