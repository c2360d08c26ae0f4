// The host tier: blocks in plain host memory under a byte budget of its own, least recently used
// dropped first. A block can be pinned (a load is promised to a sequence that began from it): a pinned
// block is never dropped to make room. What it drops to make room goes to `on_evict` (the next tier
// down), in the order dropped. Engine thread only.
//
// Memory: blocks live in slots of host slabs (kv/tiers/host_slabs.h): a dropped block's slot takes the next one.
// Every block of one tier has the same size (the first store's); another size is refused. The directory (which
// block a slot holds, pins, LRU order) and the bytes can be used apart: place() and slot_to_load() decide without
// copying, for an executor that moves the bytes later (kv/tiers/offload_planner.h); store() and load() do both.
#pragma once

#include <functional>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/tiers/host_slabs.h"
#include "kv/tiers/kv_tier.h"

namespace kvs {

class HostTier final : public KvTier {
 public:
  // Called with each block dropped to make room (not those dropped by drop()).
  using EvictSink = std::function<void(const TierBlockKey&, std::span<const TokenId>, std::span<const std::byte>)>;

  // `slab_allocator` (null: host RAM; outliving the tier): where the blocks' bytes live (kv/tiers/host_slabs.h).
  explicit HostTier(size_t capacity_bytes, EvictSink on_evict = {}, KvAllocator* slab_allocator = nullptr);

  std::string_view name() const override { return "host"; }
  Status store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) override;
  bool contains(const TierBlockKey& key, std::span<const TokenId> tokens) const override;
  Status load(const TierBlockKey& key, std::span<std::byte> out) override;
  void drop(const TierBlockKey& key) override;
  TierStats stats() const override;

  // Where a block of `bytes` bytes goes: store() without the copy. `write` is false when the tier holds the block
  // already (it is now the most recently used); else its slot was made room for and the caller writes the slot's
  // bytes (slabs()) before anything reads them. Nothing when store() would refuse it (counted as it would be).
  struct Placement {
    size_t slot = 0;
    bool write = false;
  };
  std::optional<Placement> place(const TierBlockKey& key, std::span<const TokenId> tokens, size_t bytes);
  // load() without the copy: the slot of a held block of `bytes` bytes, now the most recently used and counted as a
  // load, or the reason there is none (counted as a failed load).
  Expected<size_t> slot_to_load(const TierBlockKey& key, size_t bytes);
  HostSlabs& slabs() { return slabs_; }

  // Drops every block (none may be pinned), their slots free for the next: after a device lost a move of them.
  void drop_all();
  // Pins a held block against being dropped to make room (pins count); false when it is not held.
  bool pin(const TierBlockKey& key);
  void unpin(const TierBlockKey& key);
  size_t num_pinned() const;
  // Held bytes within the budget, the LRU list and the map agree, pinned blocks are held.
  Status check_invariants() const;

 private:
  struct Entry {
    std::vector<TokenId> tokens;
    size_t slot = 0;
    uint32_t pins = 0;
    std::list<TierBlockKey>::iterator lru = {};  // position in lru_ (front: least recently used)
  };
  // A free slot: a dropped block's, or the next one never used.
  size_t take_slot();
  // Drops unpinned blocks, least recently used first, until `bytes` more fit; false when they cannot.
  bool make_room(size_t bytes);
  void touch(Entry& entry, const TierBlockKey& key);

  size_t capacity_;
  EvictSink on_evict_;
  std::unordered_map<TierBlockKey, Entry, TierBlockKeyHash> entries_;
  std::list<TierBlockKey> lru_;
  size_t bytes_held_ = 0;
  HostSlabs slabs_;                 // the blocks' bytes (their size set by the first store)
  size_t num_slots_ = 0;            // slots handed out from the slabs so far
  std::vector<size_t> free_slots_;  // of dropped blocks
  mutable TierStats stats_;
};

}  // namespace kvs
