#include "attention/host_kv_executor.h"

#include <fmt/format.h>

#include <chrono>

#include "core/overloaded.h"

namespace kvs {

std::vector<std::vector<uint32_t>> kept_rows_of_heads(std::span<const std::vector<uint32_t>> kept,
                                                      const KvHeadShare& share) {
  if (kept.size() == 1) return {kept[0]};
  KVS_ASSERT(kept.size() == share.num_layers * share.model_kv_heads, "{} kept rows for {} layers x {} KV heads",
             kept.size(), share.num_layers, share.model_kv_heads);
  std::vector<std::vector<uint32_t>> rows;
  rows.reserve(share.num_layers * share.count);
  for (size_t layer = 0; layer < share.num_layers; ++layer)
    for (size_t h = share.first; h < share.first + share.count; ++h)
      rows.push_back(kept[layer * share.model_kv_heads + h]);
  return rows;
}

std::span<std::byte> HostKvExecutor::host_slot(uint64_t slot) {
  if (host_->block_bytes() == 0) host_->set_block_bytes(storages_[0].block_bytes());
  return host_->slot(slot);
}

Status HostKvExecutor::apply_one(const KvOp& op, KvApplyStats& stats) {
  const auto tier_move = [&](auto move) {
    if (!host_) return Status::unavailable("a KV op moves a block to or from the host tier, but there is none");
    const SteadyTime start = clock_.now();
    move();
    stats.tier_bytes += storages_[0].block_bytes();
    stats.tier_seconds += seconds_between(start, clock_.now());
    return Status::ok();
  };
  return std::visit(Overloaded{
                        [&](const KvCopySlots& c) {
                          KvStorage& s = storages_[c.group];
                          s.copy_slots(c.from, c.to, c.num_slots);
                          if (c.from_tail != kNoKeyTail) s.copy_key_tail(c.from_tail, c.to_tail);
                          return Status::ok();
                        },
                        [&](const KvCompact& c) {
                          // Per-head rows of the whole model: this storage holds its own heads' rows.
                          const bool narrow = c.kept.size() > 1 && share_.count != share_.model_kv_heads;
                          if (narrow) {
                            compact_kv(storages_[c.group], c.blocks, kept_rows_of_heads(c.kept, share_), rotation_);
                          } else {
                            compact_kv(storages_[c.group], c.blocks, c.kept, rotation_);
                          }
                          return Status::ok();
                        },
                        [&](const KvBlockToHost& m) {
                          return tier_move([&] { storages_[0].read_block(m.block, host_slot(m.host_slot)); });
                        },
                        [&](const KvHostToBlock& m) {
                          return tier_move([&] { storages_[0].write_block(m.block, host_slot(m.host_slot)); });
                        },
                        [&](const KvBlockToDisk& m) {
                          if (!disk_)
                            return Status::unavailable("a KV op writes a block to the disk tier, but there is none");
                          buffer_.resize(storages_[0].block_bytes());
                          storages_[0].read_block(m.block, buffer_);
                          disk_->persist(m.hash, m.tokens, buffer_);  // a write that fails is the disk tier's to count
                          return Status::ok();
                        },
                    },
                    op);
}

Expected<KvApplyStats> HostKvExecutor::apply(std::span<const KvOp> ops) {
  KvApplyStats stats;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (Status s = apply_one(ops[i], stats); !s)
      return s.with_context(fmt::format("KV op {} of {}", i + 1, ops.size()));
  }
  return stats;
}

}  // namespace kvs
