// The KV manager of a model whose layers fall in groups (kv/kv_layer_groups.h): one KvCacheManager per
// group, each with its own pool, block tables and prefix index, moved in step: a sequence begins,
// grows, forks, commits and is freed in every group at once, all or nothing (running out of blocks in
// any group is running out of memory). A prefix hit is the longest prefix every group holds: the global
// group's whole chain, and in a window group the blocks of the window of the first computed token (the
// only ones it takes). With one group this is a plain KvCacheManager.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace kvs {

struct HybridPrefixMatch {
  std::vector<PrefixMatch> groups;  // [group], each of num_tokens tokens
  size_t num_tokens = 0;
};

class HybridKvManager {
 public:
  // One group per config (same block size and namespaces in each); at least one.
  static Expected<std::unique_ptr<HybridKvManager>> create(std::span<const KvCacheConfig> groups);

  size_t num_groups() const { return groups_.size(); }
  KvCacheManager& group(size_t g) { return *groups_[g]; }
  const KvCacheManager& group(size_t g) const { return *groups_[g]; }
  size_t block_size() const { return groups_[0]->block_size(); }

  uint32_t name_space(std::string_view cache_salt);
  // Offload tiers for the pool (kv_cache_manager.h): one group of global layers only.
  Status attach_tiers(KvTierStack* tiers);
  // Nothing cached (a sequence that does not look up its prefix).
  HybridPrefixMatch no_match() const { return {.groups = std::vector<PrefixMatch>(groups_.size())}; }
  // The longest prefix of `tokens` cached in every group (each group's match cut to it).
  HybridPrefixMatch match_prefix(std::span<const TokenId> tokens, uint32_t name_space);
  // As KvCacheManager::begin, in every group; false with nothing changed when any group cannot. sequence_window > 0:
  // the sequence's own window (every group lets go of its blocks before it); evicts: under an eviction policy.
  [[nodiscard]] bool begin(SeqId seq, std::span<const TokenId> tokens, uint32_t name_space,
                           const HybridPrefixMatch& match, size_t n, size_t sequence_window = 0, bool evicts = false);
  void fork(SeqId parent, SeqId child);
  bool can_reserve(SeqId seq, size_t n) const;
  [[nodiscard]] bool reserve(SeqId seq, size_t n);
  void commit(SeqId seq, std::span<const TokenId> tokens);
  void free(SeqId seq);
  // Every group's KvCacheManager::forget_cached() (every sequence freed, the groups' copies and transfers done).
  void forget_cached();
  // As KvCacheManager::swap_out (offload tiers: one group only); false with nothing done otherwise.
  [[nodiscard]] bool swap_out(SeqId seq);
  // As KvCacheManager::evict, in every group (the caller compacted each group's storage alike).
  void evict(SeqId seq, size_t count);

  bool contains(SeqId seq) const { return groups_[0]->contains(seq); }
  size_t num_tokens(SeqId seq) const { return groups_[0]->num_tokens(seq); }
  size_t num_slots(SeqId seq) const { return groups_[0]->num_slots(seq); }
  size_t num_evicted(SeqId seq) const { return groups_[0]->num_evicted(seq); }
  uint64_t num_evicted_total() const { return groups_[0]->num_evicted_total(); }
  // Blocks a sequence holds in every group together.
  size_t num_blocks_held(SeqId seq) const;
  size_t bytes_held(SeqId seq) const;  // their bytes
  // Could a sequence of `tokens`, computed in chunks of at most `chunk` tokens, ever fit in the empty pools?
  bool fits_alone(size_t tokens, size_t chunk) const;
  // Every group's, summed (blocks of different groups differ in bytes: bytes are the measure).
  KvUsage usage() const;
  PrefixCacheStats prefix_stats() const { return groups_[0]->prefix_stats(); }  // every group sees the same hits
  uint64_t num_copy_on_write() const { return groups_[0]->num_copy_on_write(); }
  Status check_invariants() const;

 private:
  explicit HybridKvManager(std::vector<std::unique_ptr<KvCacheManager>> groups) : groups_(std::move(groups)) {}
  size_t blocks_held_in(size_t group, SeqId seq) const;  // blocks (not holes) of seq's table in `group`
  std::vector<std::unique_ptr<KvCacheManager>> groups_;
};

// `match` cut to its first `num_tokens` tokens (at most its own): whole blocks, then the rest copied from the
// next matched block (full or partial).
PrefixMatch truncate_match(const PrefixMatch& match, size_t num_tokens, size_t block_size);

}  // namespace kvs
