#include "kv/tiers/host_tier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kvs {

HostTier::HostTier(size_t capacity_bytes, EvictSink on_evict, KvAllocator* slab_allocator)
    : capacity_(capacity_bytes), on_evict_(std::move(on_evict)), slabs_(capacity_bytes, slab_allocator) {
  stats_.capacity_bytes = capacity_bytes;
}

void HostTier::touch(Entry& entry, const TierBlockKey& key) {
  lru_.erase(entry.lru);
  entry.lru = lru_.insert(lru_.end(), key);
}

size_t HostTier::take_slot() {
  if (!free_slots_.empty()) {
    const size_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  return num_slots_++;  // slots held never exceed the budget's (make_room)
}

bool HostTier::make_room(size_t bytes) {
  if (bytes > capacity_) return false;
  for (auto it = lru_.begin(); bytes_held_ + bytes > capacity_ && it != lru_.end();) {
    const TierBlockKey key = *it;
    Entry& victim = entries_.at(key);
    if (victim.pins > 0) {
      ++it;
      continue;
    }
    it = lru_.erase(it);
    Entry dropped = std::move(victim);
    entries_.erase(key);
    bytes_held_ -= slabs_.block_bytes();
    ++stats_.evictions;
    if (on_evict_) on_evict_(key, dropped.tokens, slabs_.slot(dropped.slot));
    free_slots_.push_back(dropped.slot);
  }
  return bytes_held_ + bytes <= capacity_;
}

std::optional<HostTier::Placement> HostTier::place(const TierBlockKey& key, std::span<const TokenId> tokens,
                                                   size_t bytes) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (std::ranges::equal(it->second.tokens, tokens)) {  // already held: now the most recently used
      touch(it->second, key);
      return Placement{.slot = it->second.slot, .write = false};
    }
    if (it->second.pins > 0) {  // the newer content cannot replace a pinned one under the same hash
      ++stats_.rejected;
      return std::nullopt;
    }
    drop(key);  // a hash collision: the newer content replaces the older
  }
  if (slabs_.block_bytes() == 0 && bytes > 0) slabs_.set_block_bytes(bytes);
  if (bytes != slabs_.block_bytes() || !make_room(bytes)) {
    ++stats_.rejected;
    return std::nullopt;
  }
  Entry entry{.tokens = {tokens.begin(), tokens.end()}, .slot = take_slot()};
  const size_t slot = entry.slot;
  entry.lru = lru_.insert(lru_.end(), key);
  entries_.emplace(key, std::move(entry));
  bytes_held_ += bytes;
  ++stats_.stores;
  stats_.bytes_stored += bytes;
  return Placement{.slot = slot, .write = true};
}

Status HostTier::store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) {
  const auto placed = place(key, tokens, bytes.size());
  if (!placed) {
    if (auto it = entries_.find(key); it != entries_.end() && it->second.pins > 0)
      return Status::unavailable("the host tier holds a pinned block under the same hash with other tokens");
    if (bytes.size() != slabs_.block_bytes()) {
      return Status::invalid_argument(
          fmt::format("the host tier holds blocks of {} bytes, not {}", slabs_.block_bytes(), bytes.size()));
    }
    return Status::out_of_memory(fmt::format("the host tier of {} bytes has no room for a block of {} ({} pinned)",
                                             capacity_, bytes.size(), num_pinned()));
  }
  if (placed->write) std::memcpy(slabs_.slot(placed->slot).data(), bytes.data(), bytes.size());
  return Status::ok();
}

bool HostTier::contains(const TierBlockKey& key, std::span<const TokenId> tokens) const {
  auto it = entries_.find(key);
  return it != entries_.end() && std::ranges::equal(it->second.tokens, tokens);
}

Expected<size_t> HostTier::slot_to_load(const TierBlockKey& key, size_t bytes) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.load_failures;
    return Status::not_found("the host tier does not hold the block");
  }
  if (slabs_.block_bytes() != bytes) {
    ++stats_.load_failures;
    return Status::invalid_argument(
        fmt::format("a block of {} bytes loaded into {} bytes", slabs_.block_bytes(), bytes));
  }
  touch(it->second, key);
  ++stats_.hits;
  ++stats_.loads;
  stats_.bytes_loaded += bytes;
  return it->second.slot;
}

Status HostTier::load(const TierBlockKey& key, std::span<std::byte> out) {
  const auto slot = slot_to_load(key, out.size());
  if (!slot) return slot.status();
  std::memcpy(out.data(), slabs_.slot(*slot).data(), out.size());
  return Status::ok();
}

void HostTier::drop(const TierBlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  KVS_ASSERT(it->second.pins == 0, "a pinned block is dropped from the host tier");
  bytes_held_ -= slabs_.block_bytes();
  free_slots_.push_back(it->second.slot);
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void HostTier::drop_all() {
  while (!lru_.empty()) {
    const TierBlockKey key = lru_.front();  // a copy: drop() erases the list's
    drop(key);
  }
}

bool HostTier::pin(const TierBlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  ++it->second.pins;
  return true;
}

void HostTier::unpin(const TierBlockKey& key) {
  auto it = entries_.find(key);
  KVS_ASSERT(it != entries_.end() && it->second.pins > 0, "unpin of a block the host tier has not pinned");
  --it->second.pins;
}

size_t HostTier::num_pinned() const {
  return static_cast<size_t>(std::ranges::count_if(entries_, [](const auto& e) { return e.second.pins > 0; }));
}

TierStats HostTier::stats() const {
  TierStats s = stats_;
  s.bytes_held = bytes_held_;
  s.blocks_held = entries_.size();
  return s;
}

Status HostTier::check_invariants() const {
  size_t bytes = 0;
  for (const auto& [key, entry] : entries_) {
    bytes += slabs_.block_bytes();
    if (!(*entry.lru == key)) return Status::corrupt("a host tier entry's LRU position names another block");
  }
  if (bytes != bytes_held_)
    return Status::corrupt(fmt::format("the host tier counts {} bytes but holds {}", bytes_held_, bytes));
  if (bytes_held_ > capacity_)
    return Status::corrupt(fmt::format("the host tier holds {} bytes over its budget of {}", bytes_held_, capacity_));
  if (entries_.size() + free_slots_.size() != num_slots_)
    return Status::corrupt(fmt::format("{} blocks held and {} free slots, but {} slots handed out", entries_.size(),
                                       free_slots_.size(), num_slots_));
  if (lru_.size() != entries_.size())
    return Status::corrupt(fmt::format("{} blocks in the LRU list, {} held", lru_.size(), entries_.size()));
  return Status::ok();
}

}  // namespace kvs
