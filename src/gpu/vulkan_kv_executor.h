// The KV op log's executor for pools on a Vulkan device (kv/kv_ops.h). On the device, each run of such operations in
// one submission of vkCmdCopyBuffer regions (a barrier between operations, so a block demoted and reloaded in one log
// ends as the log says): slot copies (a prefix hit's partial block, copy-on-write of parallel samples), every layer's
// K and V head-blocks; the tiers' moves, a block to its host tier slot and back, where the host tier's slabs are the
// device's host-tier memory (GpuDecoderModel::kv_host_tier_allocator(): host memory the device's DMA reads and
// writes); a block written through to disk, copied into a staging buffer first and persisted from there. An
// eviction's compactions run on the device too (gpu/kv_compaction.h: kept rows moved, moved keys re-rotated). So no
// byte of the pool crosses the bus by the host's loads (a host read of mapped device memory is uncached: megabytes a
// second over a discrete GPU's BAR). A run the device did not take (its submission refused, no memory for the staging
// buffer: nothing of it ran) is moved by the host instead, over the same mapped bytes, and counted. The rest is
// handed to the host executor over the same mapped bytes (key tails of
// per-channel int8 keys; tier moves into slabs of plain host RAM, as a tensor-parallel worker without a device
// allocator keeps), in log order.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <vector>

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
  // `host_tier`: where host tier slabs the device copies to and from come from.
  VulkanKvExecutor(VulkanContext& context, const VulkanKvAllocator& allocator, const VulkanKvAllocator& host_tier,
                   std::span<KvStorage> storages, std::unique_ptr<KvExecutor> host, KeyRotation rotation,
                   const KvHeadShare& share)
      : context_(context),
        allocator_(allocator),
        host_tier_(host_tier),
        storages_(storages),
        host_(std::move(host)),
        rotation_(std::move(rotation)),
        share_(share) {}

  Expected<KvApplyStats> apply(std::span<const KvOp> ops) override;
  void attach_tiers(HostSlabs* slabs, KvTierStack* disk) override;
  Status wait_for_transfers() override;
  ~VulkanKvExecutor() override;
  // Slot copies, compactions and tier moves (blocks to and from the host tier, to disk) applied on the device so far
  // (for tests and metrics).
  uint64_t device_copies() const { return device_copies_; }
  uint64_t device_compactions() const { return device_compactions_; }
  uint64_t device_tier_moves() const { return device_tier_moves_; }
  // Fault injection (tests): the device refuses the next `runs` submissions of operations, as a failed vkQueueSubmit
  // would; the host moves them instead (counted in KvApplyStats::retried).
  void inject_refused_submissions(size_t runs) { refused_submissions_ = runs; }
  // Fault injection (tests): the device takes the next `runs` submissions of operations and loses them, as a lost
  // device would (nothing of them moves; apply() fails, and what its blocks and slots hold is unknown to its caller).
  void inject_lost_submissions(size_t runs) { lost_submissions_ = runs; }

 private:
  // A copy region between two buffers.
  struct Region {
    GpuBuffer* from = nullptr;
    GpuBuffer* to = nullptr;
    VkBufferCopy copy = {};
  };
  // ops (each on_device(), none a compaction), `later` the rest of the log after them. With blocks to write to disk:
  // one submission on the compute queue, waited for, then the blocks persisted. Else on the transfer queue without
  // waiting (VulkanContext::submit_transfer): the moves the step needs in one submission, which the step's compute
  // waits for on the device, then the loads ahead whose blocks nothing after them in the log touches in another,
  // which runs beside the step's compute and is awaited from the next apply() on. `submitted`: whether the device
  // took a submission (when false, nothing of the run ran).
  Status run_on_device(std::span<const KvOp> ops, std::span<const KvOp> later, KvApplyStats& stats, bool& submitted);
  // Records ops[indices] in order (a barrier between operations), and the barrier that makes them visible to the
  // shaders, the host and later transfers; `timestamps`: the first and second query of `query` around them.
  void record(VkCommandBuffer commands, std::span<const KvOp> ops, const std::vector<std::vector<Region>>& per_op,
              std::span<const size_t> indices, std::optional<uint32_t> query) const;
  // Submits ops[indices] on the transfer queue; the value the transfer timeline reaches when they are done.
  Expected<uint64_t> submit_async(std::span<const KvOp> ops, const std::vector<std::vector<Region>>& per_op,
                                  std::span<const size_t> indices, size_t tier_bytes);
  // Takes the timings of the transfers done by now (all, when `wait`) into done_stats_.
  Status harvest(bool wait);
  // The regions of one operation; blocks to disk take staging slots from `staged` on.
  Status regions_of(const KvOp& op, size_t& staged, std::vector<Region>& out);
  // Whole-block regions between block `block` of group 0 and `other` at `offset` (one per layer and tensor, in
  // KvStorage::read_block's order); to_block: other -> block.
  Status block_regions(BlockId block, GpuBuffer* other, VkDeviceSize offset, bool to_block, std::vector<Region>& out);
  // The device buffer and offset of host tier slot `slot`; null when its slab is not device-visible.
  std::pair<GpuBuffer*, VkDeviceSize> host_slot(uint64_t slot);
  Status compact(const KvCompact& op);
  bool on_device(const KvOp& op);

  VulkanContext& context_;
  const VulkanKvAllocator& allocator_;
  const VulkanKvAllocator& host_tier_;
  std::span<KvStorage> storages_;
  std::unique_ptr<KvExecutor> host_;
  KeyRotation rotation_;
  KvHeadShare share_;
  std::unique_ptr<GpuOps> ops_;  // key_shift.comp and the recorder of compactions, made at the first
  HostSlabs* slabs_ = nullptr;
  KvTierStack* disk_ = nullptr;
  std::unique_ptr<GpuBuffer> staging_;  // blocks on their way to disk (host-cached), grown as needed
  // Transfers submitted and not yet harvested: the timeline value, the query pair timing them, the tier bytes.
  struct InFlight {
    uint64_t value = 0;
    std::optional<uint32_t> query;
    size_t tier_bytes = 0;
    std::chrono::steady_clock::time_point submitted;
  };
  std::vector<InFlight> in_flight_;
  static constexpr uint32_t kQueryPairs = 64;
  VkQueryPool queries_ = VK_NULL_HANDLE;  // timestamps around transfers (null: the device writes none)
  uint32_t next_query_ = 0;
  uint64_t ahead_value_ = 0;  // the last apply()'s loads ahead: required of compute from the next apply() on
  KvApplyStats done_stats_;   // tier moves finished since the last apply() returned its stats
  uint64_t device_copies_ = 0, device_compactions_ = 0, device_tier_moves_ = 0;
  size_t refused_submissions_ = 0;
  size_t lost_submissions_ = 0;
};

}  // namespace kvs
