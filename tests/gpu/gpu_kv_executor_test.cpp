// The KV op log's device executor (gpu/vulkan_kv_executor.h) against KvStorage::copy_slots on a host twin: slot
// copies of every length (0, part of a block, a whole one) between blocks of a pool in mapped device memory leave
// every byte of every layer's K and V as the host's copies do, in log order (a later copy reads an earlier one's
// destination).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "attention/host_kv_executor.h"
#include "core/clock.h"
#include "gpu/vulkan_kv_executor.h"
#include "gpu_test_fixture.h"

namespace kvs {
namespace {

class GpuKvExecutorTest : public test::GpuTest {};

// Every byte of every layer's K and V pools of `s`.
std::vector<std::byte> pool_bytes(const KvStorage& s) {
  std::vector<std::byte> out;
  const KvFormat& f = s.format();
  for (size_t l = 0; l < f.num_layers; ++l) {
    for (bool keys : {true, false}) {
      const auto* base =
          static_cast<const std::byte*>((keys ? s.keys(l, BlockId{0}, 0) : s.values(l, BlockId{0}, 0)).data);
      const size_t bytes = s.num_blocks() * f.pool_bytes_per_block(keys ? f.k : *f.v);
      out.insert(out.end(), base, base + bytes);
    }
  }
  return out;
}

TEST_F(GpuKvExecutorTest, SlotCopiesOnTheDeviceEqualTheHostsCopies) {
  VulkanKvAllocator allocator(*context_);
  // Quantized head-blocks carry their scales and mins after the rows: a copy moves them too.
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kInt8, KvDType::kInt4}) {
    const KvCacheSpec spec{.num_layers = 3,
                           .num_kv_heads = 2,
                           .head_dim = 12,
                           .dtype = {dtype, dtype},
                           .key_scale_axis = KvScaleAxis::kPerToken,
                           .block_size = 8};
    std::vector<KvStorage> device;
    device.emplace_back(spec, 6, 0, allocator);
    KvStorage host(spec, 6);
    // The same random bytes in both (through the device pool's mapping).
    std::mt19937 rng(3);
    const KvFormat& f = host.format();
    for (size_t l = 0; l < f.num_layers; ++l) {
      for (bool keys : {true, false}) {
        const size_t bytes = host.num_blocks() * f.pool_bytes_per_block(keys ? f.k : *f.v);
        auto* d = const_cast<std::byte*>(static_cast<const std::byte*>(
            (keys ? device[0].keys(l, BlockId{0}, 0) : device[0].values(l, BlockId{0}, 0)).data));
        auto* h = const_cast<std::byte*>(
            static_cast<const std::byte*>((keys ? host.keys(l, BlockId{0}, 0) : host.values(l, BlockId{0}, 0)).data));
        for (size_t i = 0; i < bytes; ++i) h[i] = d[i] = static_cast<std::byte>(rng());
      }
    }
    SteadyClock clock;
    auto fallback = std::make_unique<HostKvExecutor>(
        device, KvHeadShare{.num_layers = 3, .model_kv_heads = 2, .first = 0, .count = 2}, KeyRotation{}, clock);
    VulkanKvExecutor executor(*context_, allocator, device, std::move(fallback));
    const std::vector<KvOp> ops{KvCopySlots{.from = BlockId{1}, .to = BlockId{4}, .num_slots = 3},
                                KvCopySlots{.from = BlockId{0}, .to = BlockId{5}, .num_slots = 8},
                                KvCopySlots{.from = BlockId{2}, .to = BlockId{3}, .num_slots = 0},
                                KvCopySlots{.from = BlockId{4}, .to = BlockId{2}, .num_slots = 5}};
    auto applied = executor.apply(ops);
    ASSERT_TRUE(applied) << applied.status().message();
    for (const KvOp& op : ops) {
      const auto& c = std::get<KvCopySlots>(op);
      host.copy_slots(c.from, c.to, c.num_slots);
    }
    EXPECT_EQ(executor.device_copies(), ops.size());
    EXPECT_TRUE(pool_bytes(device[0]) == pool_bytes(host)) << kv_dtype_name(dtype);
  }
}

}  // namespace
}  // namespace kvs
