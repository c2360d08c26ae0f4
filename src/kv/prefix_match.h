// What a lookup of a sequence's prompt in the KV cache found (kv_cache_manager.h match_prefix); nothing is taken
// until the sequence begins from it.
#pragma once

#include <vector>

#include "core/ids.h"
#include "kv/prefix_hash.h"

namespace kvs {

struct PrefixMatch {
  // Cached full blocks, in order: the sequence shares them (kNullBlock: a hole, a block before a sliding window).
  std::vector<BlockId> blocks = {};
  std::vector<BlockHash> hashes = {};       // their chained hashes
  std::vector<BlockHash> tier_hashes = {};  // then full blocks the host tier holds: loaded into new blocks
  // Then partial_tokens more: the first slots of partial_source, a cached block (when no tier blocks came
  // before), or of a partial block a swap kept in the host tier (partial_source null), under partial_hash.
  BlockId partial_source = kNullBlock;
  size_t partial_tokens = 0;
  BlockHash partial_hash = {};
  bool partial_in_tier() const { return partial_tokens > 0 && partial_source == kNullBlock; }
  size_t num_tokens(size_t block_size) const {
    return (blocks.size() + tier_hashes.size()) * block_size + partial_tokens;
  }
};

}  // namespace kvs
