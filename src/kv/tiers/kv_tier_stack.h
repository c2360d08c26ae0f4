// The tiers below one KV pool, in order: a host tier (RAM, its own byte budget) and optionally a disk
// tier (kv/tiers/disk_tier.h). The KV manager asks it what it holds (to extend a prefix match past
// the pool) and the offload planner (kv/tiers/offload_planner.h) decides through it what moves, which an executor
// then moves (kv/kv_ops.h):
//   demote   a block the pool evicts goes into the host tier, and (write-through) to the disk tier,
//            so that the disk holds every demoted block across restarts;
//   load     a block a sequence begins from is copied from the host tier into its pool block; the
//            host entry is pinned from the lookup until the copy (pin/unpin), so nothing drops it;
//   keep     swap preemption (engine/preemption.h): a preempted sequence's block (its partial last one too) goes
//            into the host tier only, pinned until the sequence resumes or ends (release_kept);
//   prefetch a block only the disk holds is read on the disk tier's thread and put into the host tier
//            when done (poll), so a sequence waits for its prefix's reads while others compute.
// Engine thread only (the disk tier's own thread is internal to it).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kv/tiers/disk_tier.h"
#include "kv/tiers/host_tier.h"

namespace kvs {

struct KvTierConfig {
  size_t host_bytes = 0;            // the host tier's budget (at least a few blocks when there is a disk tier)
  std::string disk_directory = {};  // empty: no disk tier
  size_t disk_bytes = 0;
  std::shared_ptr<BlockFileIo> disk_io = {};  // null: POSIX files (tests inject faults here)
  LogSink log = {};
  // Where the host tier's blocks live (kv/tiers/host_slabs.h): null, host RAM; a device backend's host memory that
  // it copies to and from (Model::kv_host_tier_allocator()). Outlives the stack.
  KvAllocator* host_allocator = nullptr;
  bool enabled() const { return host_bytes > 0 || !disk_directory.empty(); }
};

// What tiers of these budgets hold, in blocks of `format` (of `block_size` tokens): the sizing the
// stack is built with, and what `kvserve calc --kv-host --kv-disk-size` reports.
struct KvTierCapacity {
  size_t host_bytes = 0;  // the budget, raised to kMinHostBlocks blocks when there is a disk tier
  size_t host_blocks = 0;
  size_t disk_file_bytes = 0;  // one block's file (header, tokens, bytes)
  size_t disk_blocks = 0;
};
inline constexpr size_t kMinHostBlocks = 8;  // the host tier stages what the disk reads back
inline size_t kv_host_tier_bytes(const TierFormat& format, size_t host_bytes, bool has_disk) {
  return has_disk ? std::max(host_bytes, kMinHostBlocks * format.block_bytes) : host_bytes;
}
KvTierCapacity kv_tier_capacity(const TierFormat& format, size_t block_size, size_t host_bytes, size_t disk_bytes);

class KvTierStack {
 public:
  // Tiers for blocks of `format`. A disk directory that cannot be used (not a kvserve cache, unreadable)
  // is an error naming it.
  static Expected<std::unique_ptr<KvTierStack>> create(const KvTierConfig& config, const TierFormat& format);
  // create(), except that a disk directory that cannot be used is logged (config.log, else stderr) and left out: the
  // tiers run without it (what it would have held is recomputed). Null when no tier is left.
  static Expected<std::unique_ptr<KvTierStack>> create_or_without_disk(const KvTierConfig& config,
                                                                       const TierFormat& format);

  const TierFormat& format() const { return format_; }
  TierBlockKey key(const BlockHash& hash) const { return {.hash = hash, .format = format_.fingerprint}; }

  // In the host tier, with these tokens: a lookup may take it.
  bool holds(const BlockHash& hash, std::span<const TokenId> tokens) const;
  bool pin(const BlockHash& hash) { return host_->pin(key(hash)); }
  void unpin(const BlockHash& hash) { host_->unpin(key(hash)); }
  // Demote, keep and load decided without their bytes, for the offload planner (kv/tiers/offload_planner.h), whose
  // executor then moves the bytes through host_slabs(): where a demoted block goes in the host tier (nothing:
  // refused), where a kept one goes, now pinned until release_kept() (nothing: it cannot be kept, no room beside the
  // pinned blocks), and the slot a pinned block loads from.
  std::optional<HostTier::Placement> place_demoted(const BlockHash& hash, std::span<const TokenId> tokens) {
    return host_->place(key(hash), tokens, format_.block_bytes);
  }
  std::optional<HostTier::Placement> place_kept(const BlockHash& hash, std::span<const TokenId> tokens);
  Expected<size_t> slot_to_load(const BlockHash& hash) { return host_->slot_to_load(key(hash), format_.block_bytes); }
  HostSlabs& host_slabs() { return host_->slabs(); }
  // Forgets every block the host tier holds (none kept or pinned), whose bytes a lost device move may have left
  // unknown; the disk tier's (written from finished moves only, checksummed) stay, and reads on the way go on.
  void forget_host() { host_->drop_all(); }
  // Lets a kept block go (back to LRU order); a block whose place_kept() failed is ignored.
  void release_kept(const BlockHash& hash);
  // Blocks the host tier could still keep pinned: its capacity less the blocks pinned now.
  size_t room_to_keep() const;
  // Writes a block to the disk tier unless it holds it (a pool block kept across a restart).
  void persist(const BlockHash& hash, std::span<const TokenId> tokens, std::span<const std::byte> bytes);
  // Starts reading a block that only the disk tier holds; true while it is on the way (now or before).
  bool prefetch(const BlockHash& hash, std::span<const TokenId> tokens);
  bool on_disk(const BlockHash& hash, std::span<const TokenId> tokens) const;
  // Moves finished prefetches into the host tier; returns how many arrived.
  size_t poll();
  size_t num_prefetching() const { return prefetching_.size(); }
  // Waits (at most `timeout`) for a prefetch to finish; poll() then takes it.
  void wait_for_prefetch(std::chrono::milliseconds timeout) {
    if (disk_ && !prefetching_.empty()) disk_->wait_for_loaded(timeout);
  }

  const HostTier& host() const { return *host_; }
  const DiskTier* disk() const { return disk_.get(); }
  DiskTier* disk() { return disk_.get(); }
  Status check_invariants() const;

 private:
  KvTierStack(const TierFormat& format, size_t host_bytes, KvAllocator* host_allocator)
      : format_(format), host_(std::make_unique<HostTier>(host_bytes, HostTier::EvictSink{}, host_allocator)) {}

  TierFormat format_;
  std::unique_ptr<HostTier> host_;
  std::unique_ptr<DiskTier> disk_;
  std::unordered_set<TierBlockKey, TierBlockKeyHash> prefetching_;   // reads on the way
  std::unordered_map<TierBlockKey, size_t, TierBlockKeyHash> kept_;  // swap pins held, by block
};

}  // namespace kvs
