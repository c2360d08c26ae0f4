// The KV op log's executor for pools on a Vulkan device (kv/kv_ops.h): slot copies (a prefix hit's partial block,
// copy-on-write of parallel samples) run on the device, every layer's K and V head-blocks of one log in one
// submission of vkCmdCopyBuffer regions, so no byte crosses the bus (a host read of mapped device memory is
// uncached: megabytes a second over a discrete GPU's BAR). What the GPU path does not run yet is handed to the host
// executor over the same mapped bytes (key tails of per-channel int8 keys, compactions, tier moves), in log order.
#pragma once

#include <memory>
#include <span>

#include "gpu/vulkan_kv_allocator.h"
#include "kv/kv_ops.h"
#include "kv/kv_storage.h"

namespace kvs {

class VulkanKvExecutor final : public KvExecutor {
 public:
  // `storages`: [layer group], their pools from `allocator`; `host` applies the rest. All outlive this.
  VulkanKvExecutor(VulkanContext& context, const VulkanKvAllocator& allocator, std::span<KvStorage> storages,
                   std::unique_ptr<KvExecutor> host)
      : context_(context), allocator_(allocator), storages_(storages), host_(std::move(host)) {}

  Expected<KvApplyStats> apply(std::span<const KvOp> ops) override;
  // Slot copies applied on the device so far (for tests and metrics).
  uint64_t device_copies() const { return device_copies_; }

 private:
  // The copies of ops[first, end) (all plain KvCopySlots) in one submission.
  Status copy_on_device(std::span<const KvOp> ops);
  static bool on_device(const KvOp& op);

  VulkanContext& context_;
  const VulkanKvAllocator& allocator_;
  std::span<KvStorage> storages_;
  std::unique_ptr<KvExecutor> host_;
  uint64_t device_copies_ = 0;
};

}  // namespace kvs
