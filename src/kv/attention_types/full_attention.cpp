#include "kv/attention_types/full_attention.h"

#include "kv/attention_types/sliding_window.h"

namespace kvs {

std::unique_ptr<KvAttentionType> make_kv_attention_type(size_t layer_window) {
  if (layer_window == 0) return std::make_unique<FullAttention>();
  return std::make_unique<SlidingWindow>(layer_window);
}

PrefixMatch FullAttention::longest_cached_prefix(const PrefixLookup& l) const {
  PrefixMatch m;
  const size_t bs = l.block_size;
  BlockHash parent_hash = l.root;
  ContentRef parent = ContentRef::root(l.name_space);
  size_t first = 0;
  for (; first + bs <= l.limit; first += bs) {
    const BlockHash hash = l.hash(parent_hash, first, bs);
    const std::optional<BlockId> hit = l.index->find_full(hash, parent, l.tokens.subspan(first, bs));
    if (!hit) break;
    m.blocks.push_back(*hit);
    m.hashes.push_back(hash);
    parent_hash = hash;
    parent = l.content_of(*hit);
  }
  // Past the pool: the blocks the host tier holds, each confirmed by its tokens.
  for (; l.tiers != nullptr && first + bs <= l.limit; first += bs) {
    const BlockHash hash = l.hash(parent_hash, first, bs);
    if (!l.tiers->holds(hash, l.tokens.subspan(first, bs))) break;
    m.tier_hashes.push_back(hash);
    parent_hash = hash;
  }
  if (m.tier_hashes.empty()) l.add_partial_match(m, parent);
  if (l.tiers != nullptr) l.add_tier_partial_match(m, parent_hash);
  return m;
}

}  // namespace kvs
