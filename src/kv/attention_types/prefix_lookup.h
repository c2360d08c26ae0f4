// What finding a cached prefix reads, for the attention types (kv/attention_types/kv_attention_type.h): a sequence's
// tokens in a namespace, the pool's prefix index and the host tier's directory (not owned), and the steps every
// attention type's match is made of: chained block hashes, a partial block copied from the pool's index, a partial
// block a swap kept in the host tier.
#pragma once

#include <span>

#include "core/ids.h"
#include "kv/block_pool.h"
#include "kv/prefix_hash.h"
#include "kv/prefix_index.h"
#include "kv/prefix_match.h"
#include "kv/tiers/kv_tier_stack.h"

namespace kvs {

struct PrefixLookup {
  std::span<const TokenId> tokens;
  uint32_t name_space = 0;
  BlockHash root = {};  // the parent hash of the namespace's first block
  size_t limit = 0;     // tokens a match may cover at most (fewer than tokens.size(): the last is computed)
  size_t block_size = 0;
  size_t copy_unit = 1;  // a partial match copies slots in multiples of this (per-channel keys: their row group)
  BlockHasher hasher = chain_block_hash;
  PrefixIndex* index = nullptr;
  const BlockPool* pool = nullptr;
  const KvTierStack* tiers = nullptr;  // null: no host tier to go on into

  // The hash of `n` tokens from `first` chained from `parent`.
  BlockHash hash(const BlockHash& parent, size_t first, size_t n) const {
    return hasher(parent, tokens.subspan(first, n));
  }
  // What a child's index entry names as its parent: the block and the generation of its content.
  ContentRef content_of(BlockId block) const { return {block.value, pool->meta(block).generation}; }
  // The best partial block in the pool's index after m's whole blocks (whose last is `parent`, a root for none), in
  // whole copy units.
  void add_partial_match(PrefixMatch& m, ContentRef parent) const;
  // A partial block a swap kept in the host tier after m's whole and tier blocks (whose last hash is `parent_hash`),
  // when longer than m's partial tokens.
  void add_tier_partial_match(PrefixMatch& m, const BlockHash& parent_hash) const;
};

}  // namespace kvs
