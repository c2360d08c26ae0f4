#include "kv/hybrid_kv_manager.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvs {

PrefixMatch truncate_match(const PrefixMatch& match, size_t num_tokens, size_t bs) {
  KVS_ASSERT(num_tokens <= match.num_tokens(bs), "a match of {} tokens cut to {}", match.num_tokens(bs), num_tokens);
  const size_t full = num_tokens / bs, rest = num_tokens % bs;
  const size_t pooled = std::min(full, match.blocks.size());
  PrefixMatch m{
      .blocks = {match.blocks.begin(), match.blocks.begin() + static_cast<ptrdiff_t>(pooled)},
      .hashes = {match.hashes.begin(), match.hashes.begin() + static_cast<ptrdiff_t>(pooled)},
      .tier_hashes = {match.tier_hashes.begin(), match.tier_hashes.begin() + static_cast<ptrdiff_t>(full - pooled)}};
  // Tier blocks are loaded whole: a cut inside them keeps the whole blocks before it.
  if (rest > 0 && full < match.blocks.size() + match.tier_hashes.size() && full >= match.blocks.size()) return m;
  if (rest > 0) {
    m.partial_source = full < match.blocks.size() ? match.blocks[full] : match.partial_source;
    m.partial_tokens = rest;
    m.partial_hash = match.partial_hash;  // a kept partial block in the host tier, loaded whole
  }
  return m;
}

Expected<std::unique_ptr<HybridKvManager>> HybridKvManager::create(std::span<const KvCacheConfig> configs) {
  if (configs.empty()) return Status::invalid_argument("a KV manager needs at least one layer group");
  std::vector<std::unique_ptr<KvCacheManager>> groups;
  for (const KvCacheConfig& c : configs) {
    if (c.spec.block_size != configs[0].spec.block_size) {
      return Status::invalid_argument(
          fmt::format("KV layer groups of block sizes {} and {}", configs[0].spec.block_size, c.spec.block_size));
    }
    auto m = KvCacheManager::create(c);
    if (!m) return m.status();
    groups.push_back(std::move(m).value());
  }
  return std::unique_ptr<HybridKvManager>(new HybridKvManager(std::move(groups)));
}

uint32_t HybridKvManager::name_space(std::string_view cache_salt) {
  const uint32_t ns = groups_[0]->name_space(cache_salt);
  for (size_t g = 1; g < groups_.size(); ++g) {
    KVS_ASSERT(groups_[g]->name_space(cache_salt) == ns, "KV layer groups disagree on namespace {}", ns);
  }
  return ns;
}

Status HybridKvManager::attach_tiers(KvTierStack* tiers) {
  if (groups_.size() != 1 || groups_[0]->config().layer_window > 0) {
    return Status::invalid_argument(fmt::format(
        "KV offload tiers need one pool of global layers, but this cache has {} layer groups{}", groups_.size(),
        groups_[0]->config().layer_window > 0 ? fmt::format(" with a window of {}", groups_[0]->config().layer_window)
                                              : ""));
  }
  if (!groups_[0]->config().prefix_caching)
    return Status::invalid_argument("KV offload tiers hold cached prefixes: they need the prefix cache on");
  groups_[0]->attach_tiers(tiers);
  return Status::ok();
}

HybridPrefixMatch HybridKvManager::match_prefix(std::span<const TokenId> tokens, uint32_t ns) {
  HybridPrefixMatch m{.groups = std::vector<PrefixMatch>(groups_.size())};
  // A global group's match is confirmed from the first block, so it holds every shorter prefix too; a window
  // group's need not (the blocks before a shorter prefix's window may be gone): each is asked again with the
  // common length as a limit until all agree (the length only falls, so this ends).
  size_t common = SIZE_MAX;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g]->config().layer_window > 0) continue;
    m.groups[g] = groups_[g]->match_prefix(tokens, ns);
    common = std::min(common, m.groups[g].num_tokens(block_size()));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (groups_[g]->config().layer_window == 0) continue;
      m.groups[g] = groups_[g]->match_prefix(tokens, ns, common);
      const size_t found = m.groups[g].num_tokens(block_size());
      changed = changed || (found < common && common != SIZE_MAX);
      common = std::min(common, found);
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g]->config().layer_window == 0) m.groups[g] = truncate_match(m.groups[g], common, block_size());
  }
  m.num_tokens = common == SIZE_MAX ? 0 : common;
  return m;
}

bool HybridKvManager::begin(SeqId seq, std::span<const TokenId> tokens, uint32_t ns, const HybridPrefixMatch& match,
                            size_t n, size_t sequence_window, bool evicts) {
  KVS_ASSERT(match.groups.size() == groups_.size(), "a match of {} groups for {}", match.groups.size(), groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g)
    if (!groups_[g]->can_begin(match.groups[g], n, sequence_window)) return false;
  for (size_t g = 0; g < groups_.size(); ++g) {
    KVS_ASSERT(groups_[g]->begin(seq, tokens, ns, match.groups[g], n, sequence_window, evicts),
               "group {} could begin but did not", g);
  }
  return true;
}

void HybridKvManager::fork(SeqId parent, SeqId child) {
  for (const auto& group : groups_) group->fork(parent, child);
}

bool HybridKvManager::can_reserve(SeqId seq, size_t n) const {
  return std::ranges::all_of(groups_, [&](const auto& group) { return group->can_reserve(seq, n); });
}

bool HybridKvManager::reserve(SeqId seq, size_t n) {
  if (!can_reserve(seq, n)) return false;
  for (size_t g = 0; g < groups_.size(); ++g)
    KVS_ASSERT(groups_[g]->reserve(seq, n), "group {} could reserve {} tokens but did not", g, n);
  return true;
}

void HybridKvManager::evict(SeqId seq, size_t count) {
  for (const auto& group : groups_) group->evict(seq, count);
}

void HybridKvManager::commit(SeqId seq, std::span<const TokenId> tokens) {
  for (const auto& group : groups_) group->commit(seq, tokens);
}

void HybridKvManager::free(SeqId seq) {
  for (const auto& group : groups_) group->free(seq);
}

void HybridKvManager::forget_cached() {
  for (const auto& group : groups_) group->forget_cached();
}

bool HybridKvManager::swap_out(SeqId seq) { return groups_.size() == 1 && groups_[0]->swap_out(seq); }

size_t HybridKvManager::blocks_held_in(size_t g, SeqId seq) const {
  if (!contains(seq)) return 0;
  const std::span<const BlockId> table = groups_[g]->block_table(seq);
  return table.size() - static_cast<size_t>(std::ranges::count(table, kNullBlock));
}

size_t HybridKvManager::num_blocks_held(SeqId seq) const {
  size_t held = 0;
  for (size_t g = 0; g < groups_.size(); ++g) held += blocks_held_in(g, seq);
  return held;
}

size_t HybridKvManager::bytes_held(SeqId seq) const {
  size_t bytes = 0;
  for (size_t g = 0; g < groups_.size(); ++g)
    bytes += blocks_held_in(g, seq) * kv_bytes_per_block(groups_[g]->config().spec).total();
  return bytes;
}

bool HybridKvManager::fits_alone(size_t tokens, size_t chunk) const {
  return std::ranges::all_of(groups_, [&](const auto& group) {
    return kv_max_blocks_per_sequence(block_size(), group->config().layer_window, tokens, chunk) <=
           group->pool().num_blocks();
  });
}

KvUsage HybridKvManager::usage() const {
  KvUsage total;
  for (const auto& group : groups_) {
    const KvUsage u = group->usage();
    total.blocks_total += u.blocks_total;
    total.blocks_used += u.blocks_used;
    total.blocks_used_peak += u.blocks_used_peak;
    total.blocks_cached_idle += u.blocks_cached_idle;
    total.key_tails_total += u.key_tails_total;
    total.key_tails_used += u.key_tails_used;
    total.bytes_total += u.bytes_total;
    total.bytes_used += u.bytes_used;
  }
  return total;
}

Status HybridKvManager::check_invariants() const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    KVS_RETURN_IF_ERROR(groups_[g]->check_invariants().with_context(fmt::format("KV layer group {}", g)));
    if (g > 0 && groups_[g]->num_sequences() != groups_[0]->num_sequences()) {
      return Status::corrupt(fmt::format("KV layer group {} holds {} sequences, group 0 {}", g,
                                         groups_[g]->num_sequences(), groups_[0]->num_sequences()));
    }
  }
  return Status::ok();
}

}  // namespace kvs
