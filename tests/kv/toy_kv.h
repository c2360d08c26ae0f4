// Toy KV managers for the KV library's unit tests: tiny shapes, exact block ids, no K/V bytes.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace kvs::test {

inline KvCacheConfig toy_config(size_t block_size, size_t num_blocks, BlockHasher hasher = chain_block_hash) {
  return {.spec = {.num_layers = 2, .num_kv_heads = 2, .head_dim = 4, .block_size = block_size},
          .num_blocks = num_blocks,
          .model_identity = "toy",
          .hasher = hasher};
}

// A manager of toy_config(...); the test stops at once if the config is refused.
inline std::unique_ptr<KvCacheManager> toy_kv(size_t block_size, size_t num_blocks,
                                              BlockHasher hasher = chain_block_hash) {
  auto m = KvCacheManager::create(toy_config(block_size, num_blocks, hasher));
  KVS_ASSERT(m.has_value(), "toy KV manager refused: {}", m.status().message());
  return std::move(m).value();
}

// n token ids starting at `first` (what a sequence commits; their values matter to prefix hashing only).
inline std::vector<TokenId> toy_tokens(size_t n, TokenId first = 0) {
  std::vector<TokenId> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = first + static_cast<TokenId>(i);
  return out;
}

inline std::vector<uint32_t> ids(std::span<const BlockId> blocks) {
  std::vector<uint32_t> out;
  for (BlockId b : blocks) out.push_back(b.value);
  return out;
}

}  // namespace kvs::test
