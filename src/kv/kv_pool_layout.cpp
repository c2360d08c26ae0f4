#include "kv/kv_pool_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_sizing.h"

namespace kvs {
namespace {

// A group's bytes with `blocks` blocks and its key tails.
size_t group_bytes(const KvCacheSpec& spec, size_t blocks, size_t tails) {
  return blocks * kv_bytes_per_block(spec).total() + tails * kv_key_tail_bytes(spec);
}

// Blocks of each group within a byte budget: window groups what they need, scaled down to half the budget (all of
// it without a global group); the global group the rest.
std::vector<size_t> blocks_in_budget(size_t budget, const std::vector<KvCacheSpec>& specs,
                                     const std::vector<size_t>& need, const std::vector<size_t>& tails,
                                     bool has_global) {
  const size_t n = specs.size();
  size_t window_bytes = 0;
  for (size_t g = has_global; g < n; ++g) window_bytes += group_bytes(specs[g], need[g], tails[g]);
  const size_t window_budget = has_global ? budget / 2 : budget;
  const double scale = window_bytes > window_budget ? double(window_budget) / double(window_bytes) : 1.0;
  std::vector<size_t> blocks(n);
  size_t used = 0;
  for (size_t g = has_global; g < n; ++g) {
    blocks[g] = static_cast<size_t>(double(need[g]) * scale);
    used += group_bytes(specs[g], blocks[g], tails[g]);
  }
  if (has_global) blocks[0] = kv_blocks_in_budget(specs[0], budget > used ? budget - used : 0, tails[0]);
  return blocks;
}

}  // namespace

KvPoolGroups kv_pool_groups(const KvPoolShape& shape, size_t window, bool hybrid) {
  KvPoolGroups out{.layers = KvLayerGroups::make(shape.spec.num_layers, shape.layer_windows, window, hybrid)};
  for (const KvLayerGroup& g : out.layers.groups) {
    out.specs.push_back(shape.spec);
    out.specs.back().num_layers = g.layers.size();
  }
  return out;
}

Expected<KvPoolLayout> kv_pool_layout(const KvPoolShape& shape, const KvPoolOptions& options) {
  KVS_RETURN_IF_ERROR(shape.spec.validate());
  const bool paged = !shape.spec.contiguous;
  KvPoolGroups groups = kv_pool_groups(shape, options.kv.window, options.kv.hybrid && paged);
  const std::vector<KvLayerGroup>& layer_groups = groups.layers.groups;
  const size_t n = layer_groups.size(), seqs = options.max_seqs, chunk = options.max_batch_tokens;
  std::vector<size_t> tails(n), need(n);  // need: blocks for max_seqs sequences
  // With a window on every layer a sequence may outgrow the context (its memory stays bounded): each window group
  // then needs room for its window and a chunk, whatever the context.
  const bool all_windowed = layer_groups[0].window > 0;
  for (size_t g = 0; g < n; ++g) {
    tails[g] = kv_key_tails_for_sequences(groups.specs[g], seqs);
    const size_t window = layer_groups[g].window;
    const size_t longest = all_windowed ? shape.context_length + window + chunk : shape.context_length;
    need[g] = seqs * kv_max_blocks_per_sequence(shape.spec.block_size, window, longest, chunk);
  }
  const bool has_global = layer_groups[0].window == 0;
  std::vector<size_t> blocks(n);
  if (options.kv.blocks > 0) {
    for (size_t g = 0; g < n; ++g)
      blocks[g] = g == 0 && has_global ? options.kv.blocks : std::min(options.kv.blocks, need[g]);
  } else {
    size_t budget = options.kv.memory_bytes;
    if (budget == 0) {  // room for max_seqs whole contexts, or 1 GiB, whichever is less
      size_t full = 0;
      for (size_t g = 0; g < n; ++g) full += group_bytes(groups.specs[g], need[g], tails[g]);
      budget = std::min<size_t>(size_t{1} << 30, full);
    }
    blocks = blocks_in_budget(budget, groups.specs, need, tails, has_global);
    for (size_t g = 0; g < n; ++g) {
      if (blocks[g] > 0) continue;
      return Status::out_of_memory(fmt::format("a KV budget of {} bytes leaves {} (of {}) no block of {} bytes", budget,
                                               n > 1 ? "a layer group" : "the pool", groups.layers.describe(),
                                               kv_bytes_per_block(groups.specs[g]).total()));
    }
  }
  KvPoolLayout layout{.layers = std::move(groups.layers)};
  for (size_t g = 0; g < n; ++g) {
    // The contiguous layout is the plain reference: no prefix cache.
    layout.groups.push_back(KvCacheConfig{.spec = groups.specs[g],
                                          .num_blocks = blocks[g],
                                          .prefix_caching = options.kv.prefix_caching && paged,
                                          .model_identity = shape.identity,
                                          .num_key_tails = tails[g],
                                          .layer_window = layout.layers.groups[g].window});
  }
  return layout;
}

}  // namespace kvs
