// Pool sizing: how a model's KV cache splits into layer groups (kv_layer_groups.h), each group's spec, and how
// many blocks each group's pool gets. The engine allocates what kv_pool_layout() says and `kvserve calc` reports
// from the same groups (kv_pool_groups), so what run and serve report is what they allocate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_layer_groups.h"
#include "kv/kv_options.h"

namespace kvs {

// The model's side: its (this rank's) KV spec for every layer, with element types, block size and layout set; its
// context; its layers' windows (empty: every layer global).
struct KvPoolShape {
  KvCacheSpec spec;
  size_t context_length = 0;
  std::vector<uint32_t> layer_windows = {};
  std::string identity = {};  // in every prefix hash: caches of different models never match
};

// The engine's side: what the pools must hold and the budget they share.
struct KvPoolOptions {
  size_t max_seqs = 1;
  size_t max_batch_tokens = 512;  // a chunk: a window group holds its window and a chunk per sequence
  // What sizes the pools: memory_bytes (0, and no block count: room for max_seqs whole contexts, or 1 GiB if less) or
  // blocks (the global group's; window groups get what they need), a window forced on every layer (0: the model's),
  // hybrid (layers of different windows in pools of their own) and prefix_caching (both paged only).
  KvOptions kv = {};
};

// The layer groups of `shape` under a forced window and the hybrid choice, and each group's spec (its layers).
struct KvPoolGroups {
  KvLayerGroups layers;
  std::vector<KvCacheSpec> specs = {};  // [group]
};
KvPoolGroups kv_pool_groups(const KvPoolShape& shape, size_t window, bool hybrid);

// The pools: the groups, and each group's config (spec, blocks, key tails, window, prefix caching). A window group
// gets blocks for max_seqs sequences of its window and a chunk (less, in proportion, when that would take more than
// half a budget shared with a global group); the global group gets the rest of the budget (or `blocks`). An error
// when a group would get no block.
struct KvPoolLayout {
  KvLayerGroups layers;
  std::vector<KvCacheConfig> groups = {};  // [group]
};
Expected<KvPoolLayout> kv_pool_layout(const KvPoolShape& shape, const KvPoolOptions& options);

}  // namespace kvs
