#include "gpu/vulkan_kv_executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/kv_compaction.h"

namespace kvs {

void VulkanKvExecutor::attach_tiers(HostSlabs* slabs, KvTierStack* disk) {
  slabs_ = slabs;
  disk_ = disk;
  host_->attach_tiers(slabs, disk);
}

std::pair<GpuBuffer*, VkDeviceSize> VulkanKvExecutor::host_slot(uint64_t slot) {
  if (slabs_ == nullptr) return {nullptr, 0};
  // A worker rank's slabs learn the block size from the first move (rank 0's from its host tier's first store).
  if (slabs_->block_bytes() == 0) slabs_->set_block_bytes(storages_[0].block_bytes());
  const HostSlabs::Address at = slabs_->address(slot);
  return {host_tier_.buffer_at(at.slab), at.offset};
}

bool VulkanKvExecutor::on_device(const KvOp& op) {
  if (const auto* copy = std::get_if<KvCopySlots>(&op))
    return copy->from_tail == kNoKeyTail && copy->to_tail == kNoKeyTail;
  if (const auto* out = std::get_if<KvBlockToHost>(&op)) return host_slot(out->host_slot).first != nullptr;
  if (const auto* in = std::get_if<KvHostToBlock>(&op)) return host_slot(in->host_slot).first != nullptr;
  return std::holds_alternative<KvBlockToDisk>(op) && disk_ != nullptr;
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

Status VulkanKvExecutor::block_regions(BlockId block, GpuBuffer* other, VkDeviceSize offset, bool to_block,
                                       std::vector<Region>& out) {
  const KvStorage& s = storages_[0];
  const KvFormat& f = s.format();
  KVS_ASSERT(block.value < s.num_blocks(), "a tier move of block {} in a pool of {}", block.value, s.num_blocks());
  for (size_t l = 0; l < f.num_layers; ++l) {
    for (bool keys : {true, false}) {  // read_block's order: each layer's K head-blocks, then its V head-blocks
      if (!keys && !s.has_values()) continue;
      const auto rows = [&](BlockId b) { return keys ? s.keys(l, b, 0) : s.values(l, b, 0); };
      const auto* base = static_cast<const std::byte*>(rows(BlockId{0}).data);
      GpuBuffer* pool = allocator_.buffer_at(base);
      if (pool == nullptr) return Status::invalid_argument("a KV pool the device executor moves is not on the device");
      const VkDeviceSize at = static_cast<const std::byte*>(rows(block).data) - base;
      const size_t part = f.pool_bytes_per_block(keys ? f.k : *f.v);  // the block's head-blocks, back to back
      if (to_block) {
        out.push_back({.from = other, .to = pool, .copy = {.srcOffset = offset, .dstOffset = at, .size = part}});
      } else {
        out.push_back({.from = pool, .to = other, .copy = {.srcOffset = at, .dstOffset = offset, .size = part}});
      }
      offset += part;
    }
  }
  return Status::ok();
}

Status VulkanKvExecutor::regions_of(const KvOp& op, size_t& staged, std::vector<Region>& out) {
  if (const auto* out_op = std::get_if<KvBlockToHost>(&op)) {
    const auto [slab, offset] = host_slot(out_op->host_slot);
    return block_regions(out_op->block, slab, offset, false, out);
  }
  if (const auto* in = std::get_if<KvHostToBlock>(&op)) {
    const auto [slab, offset] = host_slot(in->host_slot);
    return block_regions(in->block, slab, offset, true, out);
  }
  if (const auto* disk = std::get_if<KvBlockToDisk>(&op)) {
    const size_t block_bytes = storages_[0].block_bytes();
    return block_regions(disk->block, staging_.get(), staged++ * block_bytes, false, out);
  }
  // Regions per pool buffer: one per copy, layer, tensor and KV head ([block][kv_head][slot][width]: a head's slots
  // of a block are contiguous), and one more for a quantized head-block's scales. A copy of 0 slots moves nothing.
  const KvCopySlots& c = std::get<KvCopySlots>(op);
  KVS_ASSERT(c.group < storages_.size(), "a KV copy in layer group {} of {}", c.group, storages_.size());
  const KvStorage& s = storages_[c.group];
  const KvFormat& f = s.format();
  KVS_ASSERT(c.from.value < s.num_blocks() && c.to.value < s.num_blocks() && c.num_slots <= s.block_size(),
             "copy of {} slots from block {} to block {} in a pool of {} blocks of {}", c.num_slots, c.from.value,
             c.to.value, s.num_blocks(), s.block_size());
  if (c.num_slots == 0) return Status::ok();
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
        out.push_back({.from = buffer,
                       .to = buffer,
                       .copy = {.srcOffset = at(c.from), .dstOffset = at(c.to), .size = c.num_slots * t.row_bytes()}});
        // Quantized: the head-block's scales and mins too, whole, as KvStorage::copy_slots does.
        if (t.scales_bytes() > 0) {
          out.push_back({.from = buffer,
                         .to = buffer,
                         .copy = {.srcOffset = at(c.from) + t.data_bytes(),
                                  .dstOffset = at(c.to) + t.data_bytes(),
                                  .size = t.scales_bytes()}});
        }
      }
    }
  }
  return Status::ok();
}

void VulkanKvExecutor::record(VkCommandBuffer commands, std::span<const KvOp> ops,
                              const std::vector<std::vector<Region>>& per_op, std::span<const size_t> indices,
                              std::optional<uint32_t> query) const {
  if (query) {
    vkCmdResetQueryPool(commands, queries_, 2 * *query, 2);
    vkCmdWriteTimestamp(commands, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 2 * *query);
  }
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    std::map<std::pair<GpuBuffer*, GpuBuffer*>, std::vector<VkBufferCopy>> by_pair;
    for (const Region& r : per_op[i]) by_pair[{r.from, r.to}].push_back(r.copy);
    for (const auto& [pair, list] : by_pair) {
      vkCmdCopyBuffer(commands, pair.first->handle(), pair.second->handle(), static_cast<uint32_t>(list.size()),
                      list.data());
    }
    // The next operation sees this one's writes (a block demoted, then loaded with other content, in one log); slot
    // copies write fresh blocks no other copy of the log reads.
    const bool copies = k + 1 < indices.size() && std::holds_alternative<KvCopySlots>(ops[i]) &&
                        std::holds_alternative<KvCopySlots>(ops[indices[k + 1]]);
    if (k + 1 < indices.size() && !copies) {
      record_memory_barrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                            VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    }
  }
  // The shaders, any host reader and the transfers submitted after these see the copies.
  record_memory_barrier(
      commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
      VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
      VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  if (query) vkCmdWriteTimestamp(commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 2 * *query + 1);
}

Expected<uint64_t> VulkanKvExecutor::submit_async(std::span<const KvOp> ops,
                                                  const std::vector<std::vector<Region>>& per_op,
                                                  std::span<const size_t> indices, size_t tier_bytes) {
  if (queries_ == VK_NULL_HANDLE && context_.timestamp_bits() > 0) {
    const VkQueryPoolCreateInfo info{.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = 2 * kQueryPairs};
    KVS_RETURN_IF_ERROR(vk_check(vkCreateQueryPool(context_.device(), &info, nullptr, &queries_), "vkCreateQueryPool"));
  }
  // A query pair is taken again only once the transfer that had it is harvested.
  if (in_flight_.size() >= kQueryPairs) KVS_RETURN_IF_ERROR(harvest(true));
  std::optional<uint32_t> query;
  if (queries_ != VK_NULL_HANDLE) {
    query = next_query_;
    next_query_ = (next_query_ + 1) % kQueryPairs;
  }
  const auto submitted = std::chrono::steady_clock::now();
  auto value =
      context_.submit_transfer([&](VkCommandBuffer commands) { record(commands, ops, per_op, indices, query); });
  if (!value) return value.status();
  in_flight_.push_back({.value = *value, .query = query, .tier_bytes = tier_bytes, .submitted = submitted});
  return *value;
}

Status VulkanKvExecutor::harvest(bool wait) {
  if (in_flight_.empty()) return Status::ok();
  if (wait) KVS_RETURN_IF_ERROR(context_.wait_transfers(in_flight_.back().value));
  uint64_t done = 0;
  KVS_RETURN_IF_ERROR(vk_check(vkGetSemaphoreCounterValue(context_.device(), context_.transfer_timeline(), &done),
                               "vkGetSemaphoreCounterValue"));
  const uint64_t mask = context_.timestamp_bits() >= 64 ? ~uint64_t{0} : (uint64_t{1} << context_.timestamp_bits()) - 1;
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(in_flight_, [&](const InFlight& t) {
    if (t.value > done) return false;
    if (t.tier_bytes == 0) return true;
    // The device's own time for the moves where it writes timestamps, else the host's (an upper bound).
    double seconds = std::chrono::duration<double>(now - t.submitted).count();
    uint64_t ticks[2] = {0, 0};
    if (t.query && vkGetQueryPoolResults(context_.device(), queries_, 2 * *t.query, 2, sizeof(ticks), ticks,
                                         sizeof(uint64_t), VK_QUERY_RESULT_64_BIT) == VK_SUCCESS) {
      seconds = static_cast<double>((ticks[1] - ticks[0]) & mask) * context_.timestamp_period() * 1e-9;
    }
    done_stats_.tier_bytes += t.tier_bytes;
    done_stats_.tier_seconds += seconds;
    return true;
  });
  return Status::ok();
}

Status VulkanKvExecutor::wait_for_transfers() { return harvest(true); }

VulkanKvExecutor::~VulkanKvExecutor() {
  (void)harvest(true);
  if (queries_ != VK_NULL_HANDLE) vkDestroyQueryPool(context_.device(), queries_, nullptr);
}

Status VulkanKvExecutor::run_on_device(std::span<const KvOp> ops, std::span<const KvOp> later, KvApplyStats& stats,
                                       bool& submitted) {
  submitted = false;
  if (refused_submissions_ > 0) {
    --refused_submissions_;
    return Status::unavailable("vkQueueSubmit: the device refused the submission (injected)");
  }
  if (lost_submissions_ > 0) {
    --lost_submissions_;
    submitted = true;
    return Status::unavailable("VK_ERROR_DEVICE_LOST: the device lost a submission of KV moves (injected)");
  }
  // Staging for the blocks this run writes to disk.
  const size_t block_bytes = storages_[0].block_bytes();
  const size_t to_disk = static_cast<size_t>(
      std::ranges::count_if(ops, [](const KvOp& op) { return std::holds_alternative<KvBlockToDisk>(op); }));
  if (to_disk > 0 && (!staging_ || staging_->bytes() < to_disk * block_bytes)) {
    staging_.reset();
    auto staging = GpuBuffer::create(context_, to_disk * block_bytes, GpuMemory::kHostCached);
    if (!staging) return staging.status().with_context("staging KV blocks for the disk tier");
    staging_ = std::move(*staging);
  }
  // Each operation's regions, grouped by buffer pair in order; operations are kept apart by barriers.
  std::vector<std::vector<Region>> per_op(ops.size());
  size_t staged = 0;
  const auto is_tier_move = [](const KvOp& op) {
    return std::holds_alternative<KvBlockToHost>(op) || std::holds_alternative<KvHostToBlock>(op);
  };
  for (size_t i = 0; i < ops.size(); ++i) KVS_RETURN_IF_ERROR(regions_of(ops[i], staged, per_op[i]));
  const auto count = [&](const KvOp& op) {
    if (std::holds_alternative<KvCopySlots>(op)) {
      ++device_copies_;
    } else {
      ++device_tier_moves_;
    }
  };

  if (to_disk > 0) {  // the host reads the staging buffer after: one submission, waited for
    std::vector<size_t> all(ops.size());
    std::iota(all.begin(), all.end(), size_t{0});
    const size_t tier_bytes = block_bytes * static_cast<size_t>(std::ranges::count_if(ops, is_tier_move));
    const auto start = std::chrono::steady_clock::now();
    KVS_RETURN_IF_ERROR(
        context_.run([&](VkCommandBuffer commands) { record(commands, ops, per_op, all, std::nullopt); }, &submitted));
    if (tier_bytes > 0) {
      stats.tier_bytes += tier_bytes;
      stats.tier_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    staged = 0;
    for (const KvOp& op : ops) {
      count(op);
      // A write that fails is the disk tier's to count.
      if (const auto* disk = std::get_if<KvBlockToDisk>(&op))
        disk_->persist(disk->hash, disk->tokens, staging_->mapped().subspan(staged++ * block_bytes, block_bytes));
    }
    return Status::ok();
  }

  // A load ahead goes beside the step's compute unless an operation after it touches its block (then it keeps its
  // place in the log's order). Operations before it run first: the submission of the rest precedes it on the
  // transfer queue.
  const auto touches = [](const KvOp& op, BlockId block) {
    return std::visit(
        [&](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, KvCopySlots>) return o.group == 0 && (o.from == block || o.to == block);
          if constexpr (std::is_same_v<T, KvCompact>)
            return o.group == 0 && std::ranges::find(o.blocks, block) != o.blocks.end();
          if constexpr (std::is_same_v<T, KvBlockToHost> || std::is_same_v<T, KvHostToBlock> ||
                        std::is_same_v<T, KvBlockToDisk>)
            return o.block == block;
          return false;
        },
        op);
  };
  std::vector<size_t> now, ahead;
  size_t now_bytes = 0, ahead_bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto* load = std::get_if<KvHostToBlock>(&ops[i]);
    const auto touched_after = [&](BlockId block) {
      return std::ranges::any_of(ops.subspan(i + 1), [&](const KvOp& op) { return touches(op, block); }) ||
             std::ranges::any_of(later, [&](const KvOp& op) { return touches(op, block); });
    };
    if (load != nullptr && load->ahead && !touched_after(load->block)) {
      ahead.push_back(i);
      ahead_bytes += block_bytes;
    } else {
      now.push_back(i);
      now_bytes += is_tier_move(ops[i]) ? block_bytes : 0;
    }
  }
  if (!now.empty()) {
    auto value = submit_async(ops, per_op, now, now_bytes);
    if (!value) return value.status();
    submitted = true;
    context_.require_transfers(*value);  // the step's compute runs after them
  }
  if (!ahead.empty()) {
    auto value = submit_async(ops, per_op, ahead, ahead_bytes);
    if (!value)
      return submitted ? value.status().with_context("after the moves the step needs were submitted") : value.status();
    submitted = true;
    ahead_value_ = *value;  // awaited from the next apply() on
  }
  for (const KvOp& op : ops) count(op);
  return Status::ok();
}

Expected<KvApplyStats> VulkanKvExecutor::apply(std::span<const KvOp> ops) {
  // What the last apply() loaded ahead is there before this step's compute reads anything.
  if (ahead_value_ > 0) context_.require_transfers(ahead_value_);
  ahead_value_ = 0;
  KVS_RETURN_IF_ERROR(harvest(false));
  KvApplyStats stats = std::exchange(done_stats_, KvApplyStats{});
  for (size_t i = 0; i < ops.size();) {
    size_t end = i;
    while (end < ops.size() && on_device(ops[end])) ++end;
    if (end > i) {
      const std::span<const KvOp> run = ops.subspan(i, end - i);
      bool submitted = false;
      if (Status device = run_on_device(run, ops.subspan(end), stats, submitted); !device) {
        if (submitted) return device;        // it may have moved some of them: what is where is unknown
        KVS_RETURN_IF_ERROR(harvest(true));  // the host moves them after what the device is still moving
        auto host = host_->apply(run);
        if (!host) return host.status().with_context(fmt::format("after the device failed ({})", device.message()));
        stats.tier_bytes += host->tier_bytes;
        stats.tier_seconds += host->tier_seconds;
        stats.retried += run.size();
      }
      i = end;
      continue;
    }
    if (const auto* compaction = std::get_if<KvCompact>(&ops[i])) {
      KVS_RETURN_IF_ERROR(harvest(true));  // it reads what they moved, and its host side may too
      KVS_RETURN_IF_ERROR(compact(*compaction));
      ++i;
      continue;
    }
    while (end < ops.size() && !on_device(ops[end]) && !std::holds_alternative<KvCompact>(ops[end])) ++end;
    KVS_RETURN_IF_ERROR(harvest(true));  // the host touches the bytes after the device is done with them
    auto host = host_->apply(ops.subspan(i, end - i));
    if (!host) return host.status();
    stats.tier_bytes += host->tier_bytes;
    stats.tier_seconds += host->tier_seconds;
    i = end;
  }
  return stats;
}

}  // namespace kvs
