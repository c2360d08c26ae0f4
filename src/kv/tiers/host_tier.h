// The host tier: blocks in plain host memory under a byte budget of its own, least recently used
// dropped first. A block can be pinned (a load is promised to a sequence that began from it): a pinned
// block is never dropped to make room. What it drops to make room goes to `on_evict` (the next tier
// down), in the order dropped. Engine thread only.
//
// Memory: blocks live in slots of slabs (64 MiB each, or the budget if less; 2 MiB pages asked for),
// allocated as the tier fills and kept: a dropped block's slot takes the next one, so a full tier stores
// without allocating or faulting pages in (a fresh 4 KiB-page buffer per block cost a page fault per 4 KiB).
// Every block of one tier has the same size (the first store's); another size is refused.
#pragma once

#include <functional>
#include <list>
#include <unordered_map>
#include <vector>

#include "core/aligned_buffer.h"
#include "kv/tiers/kv_tier.h"

namespace kvs {

class HostTier final : public KvTier {
 public:
  // Called with each block dropped to make room (not those dropped by drop()).
  using EvictSink = std::function<void(const TierBlockKey&, std::span<const TokenId>, std::span<const std::byte>)>;

  explicit HostTier(size_t capacity_bytes, EvictSink on_evict = {});

  std::string_view name() const override { return "host"; }
  Status store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) override;
  bool contains(const TierBlockKey& key, std::span<const TokenId> tokens) const override;
  Status load(const TierBlockKey& key, std::span<std::byte> out) override;
  void drop(const TierBlockKey& key) override;
  TierStats stats() const override;

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
  static constexpr size_t kSlabBytes = size_t{64} << 20;
  std::span<std::byte> slot_bytes(size_t slot);
  std::span<const std::byte> slot_bytes(size_t slot) const;
  // A free slot: a dropped block's, or the next of the last slab, or the first of a new one.
  size_t take_slot();
  // Drops unpinned blocks, least recently used first, until `bytes` more fit; false when they cannot.
  bool make_room(size_t bytes);
  void touch(Entry& entry, const TierBlockKey& key);

  size_t capacity_;
  EvictSink on_evict_;
  std::unordered_map<TierBlockKey, Entry, TierBlockKeyHash> entries_;
  std::list<TierBlockKey> lru_;
  size_t bytes_held_ = 0;
  size_t block_bytes_ = 0;  // of every block (set by the first store)
  size_t slots_per_slab_ = 0;
  std::vector<AlignedBuffer<std::byte>> slabs_;
  size_t num_slots_ = 0;            // slots handed out from the slabs so far
  std::vector<size_t> free_slots_;  // of dropped blocks
  mutable TierStats stats_;
};

}  // namespace kvs
