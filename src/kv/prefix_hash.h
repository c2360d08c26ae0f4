// Content addresses of KV blocks for prefix caching: a full block's hash is chained from its parent's
// hash and its token ids, and the chain starts from a root that holds the extra key (the model's
// identity and the request's cache salt), so equal hashes mean "same tokens after the same prefix
// for the same model and tenant" with the odds of a 128-bit collision. A hit is still confirmed by
// the tokens (prefix_index.h), never by the hash alone.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "core/ids.h"

namespace kvs {

struct BlockHash {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashKey {  // for unordered containers: the low half is already uniformly distributed
  size_t operator()(const BlockHash& h) const { return h.low; }
};

// XXH3-128 of (model identity, cache salt): the parent of every prompt's first block.
BlockHash prefix_root_hash(std::string_view model_identity, std::string_view cache_salt);

// How a block's hash is chained: XXH3-128 of (parent hash, token ids). A test may inject another
// (e.g. one that collides on purpose).
using BlockHasher = BlockHash (*)(const BlockHash& parent, std::span<const TokenId> tokens);
BlockHash chain_block_hash(const BlockHash& parent, std::span<const TokenId> tokens);

}  // namespace kvs
