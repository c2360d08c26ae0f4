// The KV op log's executor for pools on a Vulkan device (kv/kv_ops.h): slot copies (a prefix hit's partial block,
// copy-on-write of parallel samples) run on the device, every layer's K and V head-blocks of one log in one
// submission of vkCmdCopyBuffer regions, and so do an eviction's compactions (gpu/kv_compaction.h: kept rows moved,
// moved keys re-rotated), so no byte crosses the bus (a host read of mapped device memory is uncached: megabytes a
// second over a discrete GPU's BAR). What the GPU path does not run yet is handed to the host executor over the same
// mapped bytes (key tails of per-channel int8 keys, tier moves), in log order.
#pragma once

#include <memory>
#include <span>

#include "attention/compact_kv.h"
#include "attention/host_kv_executor.h"
#include "gpu/gpu_ops.h"
#include "gpu/vulkan_kv_allocator.h"
#include "kv/kv_ops.h"
#include "kv/kv_storage.h"

namespace kvs {

class VulkanKvExecutor final : public KvExecutor {
 public:
  // `storages`: [layer group], their pools from `allocator`; `host` applies the rest. All outlive this. `rotation`:
  // the model's RoPE (compactions re-rotate the keys they move).
  // `share`: the model's KV heads these storages hold (per-head compactions name every head of the model).
  VulkanKvExecutor(VulkanContext& context, const VulkanKvAllocator& allocator, std::span<KvStorage> storages,
                   std::unique_ptr<KvExecutor> host, KeyRotation rotation, const KvHeadShare& share)
      : context_(context),
        allocator_(allocator),
        storages_(storages),
        host_(std::move(host)),
        rotation_(std::move(rotation)),
        share_(share) {}

  Expected<KvApplyStats> apply(std::span<const KvOp> ops) override;
  // Slot copies and compactions applied on the device so far (for tests and metrics).
  uint64_t device_copies() const { return device_copies_; }
  uint64_t device_compactions() const { return device_compactions_; }

 private:
  // The copies of ops[first, end) (all plain KvCopySlots) in one submission.
  Status copy_on_device(std::span<const KvOp> ops);
  Status compact(const KvCompact& op);
  static bool on_device(const KvOp& op);

  VulkanContext& context_;
  const VulkanKvAllocator& allocator_;
  std::span<KvStorage> storages_;
  std::unique_ptr<KvExecutor> host_;
  KeyRotation rotation_;
  KvHeadShare share_;
  std::unique_ptr<GpuOps> ops_;  // key_shift.comp and the recorder of compactions, made at the first
  uint64_t device_copies_ = 0, device_compactions_ = 0;
};

}  // namespace kvs
