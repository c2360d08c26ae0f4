// The KV op log's executor for K/V in host memory (kv/kv_ops.h): slot copies and key tails through KvStorage,
// compactions through compact_kv (keys re-rotated to their new positions), blocks to and from the host tier's slots,
// and rank 0's write-through to the disk tier. Every tensor-parallel rank applies the same log with one of these over
// the KV heads it holds: per-head compaction rows of the whole model are narrowed to this rank's heads here.
#pragma once

#include <span>
#include <vector>

#include "attention/compact_kv.h"
#include "core/clock.h"
#include "kv/kv_ops.h"
#include "kv/kv_storage.h"
#include "kv/tiers/host_slabs.h"
#include "kv/tiers/kv_tier_stack.h"

namespace kvs {

// Which of the model's KV heads this rank's storages hold: [first, first + count) of model_kv_heads a layer.
struct KvHeadShare {
  size_t num_layers = 0;
  size_t model_kv_heads = 0;
  size_t first = 0;
  size_t count = 0;
};

// A compaction's rows for the heads of `share`: `kept` has a row per layer and KV head of the whole model, or one row
// for all (returned as it is).
std::vector<std::vector<uint32_t>> kept_rows_of_heads(std::span<const std::vector<uint32_t>> kept,
                                                      const KvHeadShare& share);

class HostKvExecutor final : public KvExecutor {
 public:
  // `storages`: [layer group], outliving this. `rotation`: the model's RoPE (compactions move keys).
  // `clock` (outliving this) times the tier moves.
  HostKvExecutor(std::span<KvStorage> storages, const KvHeadShare& share, KeyRotation rotation, const Clock& clock)
      : storages_(storages), share_(share), rotation_(std::move(rotation)), clock_(clock) {}

  void attach_tiers(HostSlabs* slabs, KvTierStack* disk) override {
    host_ = slabs;
    disk_ = disk;
  }

  Expected<KvApplyStats> apply(std::span<const KvOp> ops) override;

 private:
  Status apply_one(const KvOp& op, KvApplyStats& stats);
  std::span<std::byte> host_slot(uint64_t slot);

  std::span<KvStorage> storages_;
  KvHeadShare share_;
  KeyRotation rotation_;
  const Clock& clock_;
  HostSlabs* host_ = nullptr;
  KvTierStack* disk_ = nullptr;
  std::vector<std::byte> buffer_;  // a block on its way to the disk tier
};

}  // namespace kvs
