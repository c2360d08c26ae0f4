#include "kv/tiers/kv_tier_stack.h"

#include <fmt/format.h>

#include "kv/tiers/block_file.h"

namespace kvs {

KvTierCapacity kv_tier_capacity(const TierFormat& format, size_t block_size, size_t host_bytes, size_t disk_bytes) {
  KvTierCapacity c;
  c.host_bytes = kv_host_tier_bytes(format, host_bytes, disk_bytes > 0);
  c.host_blocks = c.host_bytes / format.block_bytes;
  c.disk_file_bytes = block_file_bytes(format.description.size(), block_size, format.block_bytes);
  c.disk_blocks = disk_bytes / c.disk_file_bytes;
  return c;
}

Expected<std::unique_ptr<KvTierStack>> KvTierStack::create(const KvTierConfig& config, const TierFormat& format) {
  const size_t host_bytes = kv_host_tier_bytes(format, config.host_bytes, !config.disk_directory.empty());
  if (host_bytes < format.block_bytes) {
    return Status::invalid_argument(
        fmt::format("a KV host tier of {} bytes holds no block of {} bytes", host_bytes, format.block_bytes));
  }
  auto stack = std::unique_ptr<KvTierStack>(new KvTierStack(format, host_bytes, config.host_allocator));
  if (!config.disk_directory.empty()) {
    auto disk = DiskTier::open({.directory = config.disk_directory,
                                .capacity_bytes = config.disk_bytes,
                                .format = format,
                                .io = config.disk_io,
                                .log = config.log});
    if (!disk) return disk.status().with_context("the KV disk tier");
    stack->disk_ = std::move(disk).value();
  }
  return stack;
}

Expected<std::unique_ptr<KvTierStack>> KvTierStack::create_or_without_disk(const KvTierConfig& config,
                                                                           const TierFormat& format) {
  auto stack = create(config, format);
  if (stack || config.disk_directory.empty()) return stack;
  // A directory that is not ours, or unreadable: recompute instead, and say so.
  log_line(config.log, fmt::format("{}; running without a disk tier", stack.status().message()));
  KvTierConfig host_only = config;
  host_only.disk_directory.clear();
  if (!host_only.enabled()) return std::unique_ptr<KvTierStack>();
  return create(host_only, format);
}

bool KvTierStack::holds(const BlockHash& hash, std::span<const TokenId> tokens) const {
  return host_->contains(key(hash), tokens);
}

bool KvTierStack::on_disk(const BlockHash& hash, std::span<const TokenId> tokens) const {
  return disk_ && disk_->contains(key(hash), tokens);
}

void KvTierStack::persist(const BlockHash& hash, std::span<const TokenId> tokens, std::span<const std::byte> bytes) {
  if (disk_ && !disk_->contains(key(hash), tokens)) (void)disk_->store(key(hash), tokens, bytes);
}

std::optional<HostTier::Placement> KvTierStack::place_kept(const BlockHash& hash, std::span<const TokenId> tokens) {
  const TierBlockKey k = key(hash);
  std::optional<HostTier::Placement> placed;
  if (host_->contains(k, tokens)) {
    placed = HostTier::Placement{.write = false};  // held: nothing to write, the slot does not matter
  } else {
    placed = host_->place(k, tokens, format_.block_bytes);
    if (!placed) return std::nullopt;
  }
  KVS_ASSERT(host_->pin(k), "a block just stored in the host tier is gone");
  ++kept_[k];
  return placed;
}

void KvTierStack::release_kept(const BlockHash& hash) {
  auto it = kept_.find(key(hash));
  if (it == kept_.end()) return;
  host_->unpin(it->first);
  if (--it->second == 0) kept_.erase(it);
}

size_t KvTierStack::room_to_keep() const {
  const size_t capacity = host_->stats().capacity_bytes / format_.block_bytes, pinned = host_->num_pinned();
  return capacity > pinned ? capacity - pinned : 0;
}

bool KvTierStack::prefetch(const BlockHash& hash, std::span<const TokenId> tokens) {
  const TierBlockKey k = key(hash);
  if (prefetching_.contains(k)) return true;
  if (!disk_ || !disk_->prefetch(k, tokens)) return false;
  prefetching_.insert(k);
  return true;
}

size_t KvTierStack::poll() {
  if (!disk_) return 0;
  size_t arrived = 0;
  for (DiskTier::Loaded& loaded : disk_->take_loaded()) {
    prefetching_.erase(loaded.key);
    if (!loaded.status) continue;  // the disk tier dropped it: recomputed
    if (host_->store(loaded.key, loaded.tokens, loaded.bytes)) ++arrived;
  }
  return arrived;
}

Status KvTierStack::check_invariants() const {
  KVS_RETURN_IF_ERROR(host_->check_invariants());
  if (disk_) KVS_RETURN_IF_ERROR(disk_->check_invariants());
  return Status::ok();
}

}  // namespace kvs
