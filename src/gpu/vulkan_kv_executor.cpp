#include "gpu/vulkan_kv_executor.h"

#include <map>
#include <vector>

#include "gpu/kv_compaction.h"

namespace kvs {

bool VulkanKvExecutor::on_device(const KvOp& op) {
  const auto* copy = std::get_if<KvCopySlots>(&op);
  return copy != nullptr && copy->from_tail == kNoKeyTail && copy->to_tail == kNoKeyTail;
}

Status VulkanKvExecutor::compact(const KvCompact& op) {
  KVS_ASSERT(op.group < storages_.size(), "a compaction in layer group {} of {}", op.group, storages_.size());
  if (!ops_) {
    auto ops = GpuOps::create(context_);
    if (!ops) return ops.status();
    ops_ = std::move(*ops);
  }
  KvCompact mine = op;  // this rank's heads' rows, when the compaction has a row per head of the model
  mine.kept = kept_rows_of_heads(op.kept, share_);
  KVS_RETURN_IF_ERROR(compact_on_device(*ops_, context_, allocator_, storages_[op.group], mine, rotation_));
  ++device_compactions_;
  return Status::ok();
}

Status VulkanKvExecutor::copy_on_device(std::span<const KvOp> ops) {
  // Regions per pool buffer: one per copy, layer, tensor and KV head ([block][kv_head][slot][width]: a head's slots
  // of a block are contiguous), and one more for a quantized head-block's scales. A copy of 0 slots moves nothing.
  std::map<GpuBuffer*, std::vector<VkBufferCopy>> regions;
  for (const KvOp& op : ops) {
    const KvCopySlots& c = std::get<KvCopySlots>(op);
    KVS_ASSERT(c.group < storages_.size(), "a KV copy in layer group {} of {}", c.group, storages_.size());
    const KvStorage& s = storages_[c.group];
    const KvFormat& f = s.format();
    KVS_ASSERT(c.from.value < s.num_blocks() && c.to.value < s.num_blocks() && c.num_slots <= s.block_size(),
               "copy of {} slots from block {} to block {} in a pool of {} blocks of {}", c.num_slots, c.from.value,
               c.to.value, s.num_blocks(), s.block_size());
    if (c.num_slots == 0) continue;
    for (size_t l = 0; l < f.num_layers; ++l) {
      for (bool keys : {true, false}) {
        if (!keys && !s.has_values()) continue;
        const auto rows = [&](BlockId block, size_t h) { return keys ? s.keys(l, block, h) : s.values(l, block, h); };
        const auto* base = static_cast<const std::byte*>(rows(BlockId{0}, 0).data);
        GpuBuffer* buffer = allocator_.buffer_at(base);
        if (buffer == nullptr)
          return Status::invalid_argument("a KV pool the device executor copies is not on the device");
        const KvTensorFormat& t = keys ? f.k : *f.v;
        for (size_t h = 0; h < f.num_heads; ++h) {
          const auto at = [&](BlockId block) {
            return static_cast<VkDeviceSize>(static_cast<const std::byte*>(rows(block, h).data) - base);
          };
          regions[buffer].push_back(
              {.srcOffset = at(c.from), .dstOffset = at(c.to), .size = c.num_slots * t.row_bytes()});
          // Quantized: the head-block's scales and mins too, whole, as KvStorage::copy_slots does.
          if (t.scales_bytes() > 0) {
            regions[buffer].push_back({.srcOffset = at(c.from) + t.data_bytes(),
                                       .dstOffset = at(c.to) + t.data_bytes(),
                                       .size = t.scales_bytes()});
          }
        }
      }
    }
  }
  if (regions.empty()) return Status::ok();
  KVS_RETURN_IF_ERROR(context_.run([&](VkCommandBuffer commands) {
    for (const auto& [buffer, list] : regions) {
      vkCmdCopyBuffer(commands, buffer->handle(), buffer->handle(), static_cast<uint32_t>(list.size()), list.data());
    }
    // The next step's shaders and any host reader see the copies.
    record_memory_barrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT);
  }));
  device_copies_ += ops.size();
  return Status::ok();
}

Expected<KvApplyStats> VulkanKvExecutor::apply(std::span<const KvOp> ops) {
  KvApplyStats stats;
  for (size_t i = 0; i < ops.size();) {
    size_t end = i;
    while (end < ops.size() && on_device(ops[end])) ++end;
    if (end > i) {
      KVS_RETURN_IF_ERROR(copy_on_device(ops.subspan(i, end - i)));
      i = end;
      continue;
    }
    if (const auto* compaction = std::get_if<KvCompact>(&ops[i])) {
      KVS_RETURN_IF_ERROR(compact(*compaction));
      ++i;
      continue;
    }
    while (end < ops.size() && !on_device(ops[end]) && !std::holds_alternative<KvCompact>(ops[end])) ++end;
    auto host = host_->apply(ops.subspan(i, end - i));
    if (!host) return host.status();
    stats.tier_bytes += host->tier_bytes;
    stats.tier_seconds += host->tier_seconds;
    i = end;
  }
  return stats;
}

}  // namespace kvs
