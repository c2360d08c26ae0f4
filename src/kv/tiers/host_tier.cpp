#include "kv/tiers/host_tier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kvs {

HostTier::HostTier(size_t capacity_bytes, EvictSink on_evict)
    : capacity_(capacity_bytes), on_evict_(std::move(on_evict)) {
  stats_.capacity_bytes = capacity_bytes;
}

void HostTier::touch(Entry& entry, const TierBlockKey& key) {
  lru_.erase(entry.lru);
  entry.lru = lru_.insert(lru_.end(), key);
}

std::span<std::byte> HostTier::slot_bytes(size_t slot) {
  return slabs_[slot / slots_per_slab_].span().subspan((slot % slots_per_slab_) * block_bytes_, block_bytes_);
}

std::span<const std::byte> HostTier::slot_bytes(size_t slot) const {
  return slabs_[slot / slots_per_slab_].span().subspan((slot % slots_per_slab_) * block_bytes_, block_bytes_);
}

size_t HostTier::take_slot() {
  if (!free_slots_.empty()) {
    const size_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  if (num_slots_ == slabs_.size() * slots_per_slab_) {
    // Slots held never exceed the budget's (make_room), so the last slab needs only what is left of it.
    const size_t left = capacity_ / block_bytes_ - num_slots_;
    slabs_.emplace_back(std::min(slots_per_slab_, left) * block_bytes_, PageHint::kHuge);
  }
  return num_slots_++;
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
    bytes_held_ -= block_bytes_;
    ++stats_.evictions;
    if (on_evict_) on_evict_(key, dropped.tokens, slot_bytes(dropped.slot));
    free_slots_.push_back(dropped.slot);
  }
  return bytes_held_ + bytes <= capacity_;
}

Status HostTier::store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (std::ranges::equal(it->second.tokens, tokens)) {  // already held: now the most recently used
      touch(it->second, key);
      return Status::ok();
    }
    if (it->second.pins > 0) {
      ++stats_.rejected;
      return Status::unavailable("the host tier holds a pinned block under the same hash with other tokens");
    }
    drop(key);  // a hash collision: the newer content replaces the older
  }
  if (block_bytes_ == 0 && !bytes.empty()) {
    block_bytes_ = bytes.size();
    slots_per_slab_ = std::max<size_t>(1, std::min(kSlabBytes, capacity_) / block_bytes_);
  }
  if (bytes.size() != block_bytes_) {
    ++stats_.rejected;
    return Status::invalid_argument(
        fmt::format("the host tier holds blocks of {} bytes, not {}", block_bytes_, bytes.size()));
  }
  if (!make_room(bytes.size())) {
    ++stats_.rejected;
    return Status::out_of_memory(fmt::format("the host tier of {} bytes has no room for a block of {} ({} pinned)",
                                             capacity_, bytes.size(), num_pinned()));
  }
  Entry entry{.tokens = {tokens.begin(), tokens.end()}, .slot = take_slot()};
  std::memcpy(slot_bytes(entry.slot).data(), bytes.data(), bytes.size());
  entry.lru = lru_.insert(lru_.end(), key);
  entries_.emplace(key, std::move(entry));
  bytes_held_ += bytes.size();
  ++stats_.stores;
  stats_.bytes_stored += bytes.size();
  return Status::ok();
}

bool HostTier::contains(const TierBlockKey& key, std::span<const TokenId> tokens) const {
  auto it = entries_.find(key);
  return it != entries_.end() && std::ranges::equal(it->second.tokens, tokens);
}

Status HostTier::load(const TierBlockKey& key, std::span<std::byte> out) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.load_failures;
    return Status::not_found("the host tier does not hold the block");
  }
  if (block_bytes_ != out.size()) {
    ++stats_.load_failures;
    return Status::invalid_argument(fmt::format("a block of {} bytes loaded into {} bytes", block_bytes_, out.size()));
  }
  std::memcpy(out.data(), slot_bytes(it->second.slot).data(), out.size());
  touch(it->second, key);
  ++stats_.hits;
  ++stats_.loads;
  stats_.bytes_loaded += out.size();
  return Status::ok();
}

void HostTier::drop(const TierBlockKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  KVS_ASSERT(it->second.pins == 0, "a pinned block is dropped from the host tier");
  bytes_held_ -= block_bytes_;
  free_slots_.push_back(it->second.slot);
  lru_.erase(it->second.lru);
  entries_.erase(it);
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
    bytes += block_bytes_;
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
