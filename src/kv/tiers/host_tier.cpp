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
    bytes_held_ -= dropped.bytes.size();
    ++stats_.evictions;
    if (on_evict_) on_evict_(key, dropped.tokens, dropped.bytes);
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
  if (!make_room(bytes.size())) {
    ++stats_.rejected;
    return Status::out_of_memory(fmt::format("the host tier of {} bytes has no room for a block of {} ({} pinned)",
                                             capacity_, bytes.size(), num_pinned()));
  }
  Entry entry{.tokens = {tokens.begin(), tokens.end()}, .bytes = {bytes.begin(), bytes.end()}};
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
  if (it->second.bytes.size() != out.size()) {
    ++stats_.load_failures;
    return Status::invalid_argument(
        fmt::format("a block of {} bytes loaded into {} bytes", it->second.bytes.size(), out.size()));
  }
  std::memcpy(out.data(), it->second.bytes.data(), out.size());
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
  bytes_held_ -= it->second.bytes.size();
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
    bytes += entry.bytes.size();
    if (!(*entry.lru == key)) return Status::corrupt("a host tier entry's LRU position names another block");
  }
  if (bytes != bytes_held_)
    return Status::corrupt(fmt::format("the host tier counts {} bytes but holds {}", bytes_held_, bytes));
  if (bytes_held_ > capacity_)
    return Status::corrupt(fmt::format("the host tier holds {} bytes over its budget of {}", bytes_held_, capacity_));
  if (lru_.size() != entries_.size())
    return Status::corrupt(fmt::format("{} blocks in the LRU list, {} held", lru_.size(), entries_.size()));
  return Status::ok();
}

}  // namespace kvs
