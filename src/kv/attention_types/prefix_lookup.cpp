#include "kv/attention_types/prefix_lookup.h"

#include <algorithm>

namespace kvs {

void PrefixLookup::add_partial_match(PrefixMatch& m, ContentRef parent) const {
  const size_t next = m.blocks.size() * block_size;
  const PrefixIndex::PartialMatch partial =
      index->find_partial(parent, tokens.subspan(next, std::min(block_size, limit - next)));
  // Keys quantized per channel lie in the source's rows only for its complete groups (a filling one
  // waited in a key tail): only whole groups are copied, the very bits a miss would compute.
  const size_t copied = partial.num_tokens / copy_unit * copy_unit;
  if (copied > 0) {
    m.partial_source = partial.block;
    m.partial_tokens = copied;
  }
}

void PrefixLookup::add_tier_partial_match(PrefixMatch& m, const BlockHash& parent_hash) const {
  const size_t next = (m.blocks.size() + m.tier_hashes.size()) * block_size;
  if (next >= limit) return;
  // A kept partial block holds the whole copy units its sequence had computed: try each length, longest first.
  for (size_t n = std::min(block_size - 1, limit - next) / copy_unit * copy_unit; n > m.partial_tokens;
       n -= copy_unit) {
    const BlockHash h = hash(parent_hash, next, n);
    if (tiers->holds(h, tokens.subspan(next, n))) {
      m.partial_source = kNullBlock;
      m.partial_tokens = n;
      m.partial_hash = h;
      return;
    }
  }
}

}  // namespace kvs
