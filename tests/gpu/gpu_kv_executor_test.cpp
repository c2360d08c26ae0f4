// The KV op log's device executor (gpu/vulkan_kv_executor.h) against the host's operations on a twin: slot copies of
// every length (0, part of a block, a whole one) between blocks of a pool in mapped device memory leave every byte of
// every layer's K and V as KvStorage::copy_slots does, in log order (a later copy reads an earlier one's destination);
// compactions (kept rows moved to the front, moved keys re-rotated by RoPE, Hadamard-rotated keys taken out of and put
// back in their form, quantized keys requantized) leave every byte as attention/compact_kv does; tier moves (blocks to
// host tier slots in the device's host-tier memory and back, blocks written through to disk from a staging buffer)
// leave the pool, the slots and the block files as the host executor's memcpys do.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "attention/host_kv_executor.h"
#include "attention/write_kv.h"
#include "core/clock.h"
#include "gpu/vulkan_kv_executor.h"
#include "gpu_test_fixture.h"
#include "tensor/ops.h"
#include "test_support.h"

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
  VulkanKvAllocator allocator(*context_), host_tier(*context_, GpuMemory::kHostCached);
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
    VulkanKvExecutor executor(*context_, allocator, host_tier, device, std::move(fallback), KeyRotation{},
                              KvHeadShare{.num_layers = 3, .model_kv_heads = 2, .first = 0, .count = 2});
    const std::vector<KvOp> ops{KvCopySlots{.from = BlockId{1}, .to = BlockId{4}, .num_slots = 3},
                                KvCopySlots{.from = BlockId{0}, .to = BlockId{5}, .num_slots = 8},
                                KvCopySlots{.from = BlockId{2}, .to = BlockId{3}, .num_slots = 0},
                                KvCopySlots{.from = BlockId{4}, .to = BlockId{2}, .num_slots = 5}};
    auto applied = executor.apply(ops);
    ASSERT_TRUE(applied) << applied.status().message();
    ASSERT_TRUE(executor.wait_for_transfers()) << "the copies run on the transfer queue, the host waits for them";
    for (const KvOp& op : ops) {
      const auto& c = std::get<KvCopySlots>(op);
      host.copy_slots(c.from, c.to, c.num_slots);
    }
    EXPECT_EQ(executor.device_copies(), ops.size());
    EXPECT_TRUE(pool_bytes(device[0]) == pool_bytes(host)) << kv_dtype_name(dtype);
  }
}

// Writes the same random K/V rows into every slot of `host` and of `device` (its mapped pool).
void fill_both(KvStorage& host, KvStorage& device, std::mt19937& rng) {
  const KvCacheSpec& spec = host.spec();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(spec.num_kv_heads * spec.head_dim), v(spec.num_kv_heads * spec.head_dim);
  for (size_t layer = 0; layer < spec.num_layers; ++layer) {
    for (size_t slot = 0; slot < host.token_capacity(); ++slot) {
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      write_kv_run(host, layer, KvSlot{slot}, 1, k, v);
      write_kv_run(device, layer, KvSlot{slot}, 1, k, v);
    }
  }
}

// A compaction of a sequence of 45 slots over shuffled blocks of 8 (the kept slots crossing blocks, moving up to 41
// slots back): one kept set for every layer and head (sinks: the first 4 and the last 20), then a set per layer and
// KV head (H2O: each its own), in f32, f16, bf16, int8 and int4 keys per token, plain and Hadamard-rotated, RoPE
// pairs interleaved and NeoX. The device's pools equal the host's compact_kv byte for byte: every rounding of the
// re-rotation is the CPU's (unfused products, the same butterflies, the same quantization).
TEST_F(GpuKvExecutorTest, CompactionsOnTheDeviceEqualTheHostsByteForByte) {
  VulkanKvAllocator allocator(*context_), host_tier(*context_, GpuMemory::kHostCached);
  std::mt19937 rng(5);
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kInt8, KvDType::kInt4}) {
    for (bool rotated : {false, true}) {
      for (bool neox : {false, true}) {
        const KvCacheSpec spec{.num_layers = 2,
                               .num_kv_heads = 2,
                               .head_dim = 32,
                               .dtype = {dtype, dtype},
                               .key_scale_axis = KvScaleAxis::kPerToken,
                               .rotate_keys = rotated,
                               .block_size = 8};
        const std::string what =
            fmt::format("{}{}{}", kv_dtype_name(dtype), rotated ? ", rotated" : "", neox ? ", NeoX" : "");
        std::vector<KvStorage> device;
        device.emplace_back(spec, 8, 0, allocator);
        KvStorage host(spec, 8);
        fill_both(host, device[0], rng);
        const std::vector<BlockId> blocks{BlockId{5}, BlockId{2}, BlockId{7}, BlockId{0}, BlockId{3}, BlockId{6}};
        std::vector<uint32_t> sinks{0, 1, 2, 3};
        for (uint32_t s = 25; s < 45; ++s) sinks.push_back(s);
        std::vector<std::vector<uint32_t>> per_head;
        for (size_t row = 0; row < spec.num_layers * spec.num_kv_heads; ++row) {
          std::vector<uint32_t> kept;
          for (uint32_t s = 0; s < 45; ++s)
            if (rng() % 3 != 0 || s >= 40) kept.push_back(s);
          per_head.push_back(kept);
        }
        const KeyRotation rotation{.inv_freq = rope_inverse_frequencies(32, 10000.0f), .neox = neox};
        SteadyClock clock;
        auto fallback = std::make_unique<HostKvExecutor>(
            device, KvHeadShare{.num_layers = 2, .model_kv_heads = 2, .first = 0, .count = 2}, rotation, clock);
        VulkanKvExecutor executor(*context_, allocator, host_tier, device, std::move(fallback), rotation,
                                  KvHeadShare{.num_layers = 2, .model_kv_heads = 2, .first = 0, .count = 2});
        const std::vector<KvOp> ops{KvCompact{.blocks = blocks, .kept = {sinks}},
                                    KvCompact{.blocks = blocks, .kept = per_head}};
        auto applied = executor.apply(ops);
        ASSERT_TRUE(applied) << what << ": " << applied.status().message();
        EXPECT_EQ(executor.device_compactions(), 2u) << what;
        compact_kv(host, blocks, std::vector<std::vector<uint32_t>>{sinks}, rotation);
        compact_kv(host, blocks, per_head, rotation);
        EXPECT_TRUE(pool_bytes(device[0]) == pool_bytes(host)) << what;
      }
    }
  }
}

// A log of tier moves over int8 K/V (scales after the rows): blocks out to host tier slots, a slot reloaded into
// another block, a block demoted and a slot reloaded into it in the same log (the order matters), slot copies between
// them, and blocks written through to disk. The device (slabs from the host-tier allocator, every move a
// vkCmdCopyBuffer) ends with the pool, the slots and the disk tier's files the host executor's twin has.
TEST_F(GpuKvExecutorTest, TierMovesOnTheDeviceEqualTheHostsByteForByte) {
  VulkanKvAllocator allocator(*context_), host_tier(*context_, GpuMemory::kHostCached);
  const KvCacheSpec spec{.num_layers = 3,
                         .num_kv_heads = 2,
                         .head_dim = 16,
                         .dtype = {KvDType::kInt8, KvDType::kInt8},
                         .key_scale_axis = KvScaleAxis::kPerToken,
                         .block_size = 8};
  const KvHeadShare share{.num_layers = 3, .model_kv_heads = 2, .first = 0, .count = 2};
  std::vector<KvStorage> device, host;
  device.emplace_back(spec, 6, 0, allocator);
  host.emplace_back(spec, 6);
  std::mt19937 rng(11);
  fill_both(host[0], device[0], rng);
  const TierFormat format = tier_format(spec);
  test::TempDir dir("gpu_kv_tier_moves");
  const auto stack = [&](const std::string& name, KvAllocator* slabs) {
    auto s = KvTierStack::create({.host_bytes = 8 * format.block_bytes,
                                  .disk_directory = dir.file(name),
                                  .disk_bytes = 64 * format.block_bytes,
                                  .host_allocator = slabs},
                                 format);
    EXPECT_TRUE(s) << s.status().message();
    return std::move(s).value();
  };
  auto device_tiers = stack("device", &host_tier), host_tiers = stack("host", nullptr);
  device_tiers->host_slabs().set_block_bytes(format.block_bytes);
  host_tiers->host_slabs().set_block_bytes(format.block_bytes);
  SteadyClock clock;
  VulkanKvExecutor executor(*context_, allocator, host_tier, device,
                            std::make_unique<HostKvExecutor>(device, share, KeyRotation{}, clock), KeyRotation{},
                            share);
  HostKvExecutor twin(host, share, KeyRotation{}, clock);
  executor.attach_tiers(&device_tiers->host_slabs(), device_tiers.get());
  twin.attach_tiers(&host_tiers->host_slabs(), host_tiers.get());
  const auto hash = [](uint64_t n) { return BlockHash{.low = n, .high = ~n}; };
  const std::vector<TokenId> tokens{1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<KvOp> ops{KvBlockToHost{.block = BlockId{1}, .host_slot = 0},
                              KvBlockToHost{.block = BlockId{4}, .host_slot = 5},
                              KvBlockToDisk{.block = BlockId{4}, .hash = hash(4), .tokens = tokens},
                              KvHostToBlock{.host_slot = 0, .block = BlockId{2}},
                              KvBlockToHost{.block = BlockId{3}, .host_slot = 0},
                              KvHostToBlock{.host_slot = 5, .block = BlockId{3}},
                              KvCopySlots{.from = BlockId{3}, .to = BlockId{0}, .num_slots = 5},
                              KvBlockToDisk{.block = BlockId{0}, .hash = hash(7), .tokens = tokens}};
  auto applied = executor.apply(ops);
  ASSERT_TRUE(applied) << applied.status().message();
  auto twin_applied = twin.apply(ops);
  ASSERT_TRUE(twin_applied) << twin_applied.status().message();
  EXPECT_EQ(executor.device_tier_moves(), 7u) << "every tier move ran on the device";
  EXPECT_EQ(applied->tier_bytes, 5 * format.block_bytes) << "blocks to and from the host tier";
  EXPECT_TRUE(pool_bytes(device[0]) == pool_bytes(host[0]));
  for (size_t slot : {0, 5}) {
    const std::span<const std::byte> d = device_tiers->host_slabs().slot(slot), h = host_tiers->host_slabs().slot(slot);
    EXPECT_TRUE(std::ranges::equal(d, h)) << "slot " << slot;
  }
  // A submission the device refuses (nothing of it ran): the host moves the same operations, to the same bytes.
  executor.inject_refused_submissions(1);
  auto retried = executor.apply(ops);
  ASSERT_TRUE(retried) << retried.status().message();
  EXPECT_EQ(retried->retried, ops.size());
  EXPECT_EQ(executor.device_tier_moves(), 7u) << "the device moved nothing more";
  ASSERT_TRUE(twin.apply(ops));
  EXPECT_TRUE(pool_bytes(device[0]) == pool_bytes(host[0])) << "after the host's retry";
  EXPECT_TRUE(std::ranges::equal(device_tiers->host_slabs().slot(0), host_tiers->host_slabs().slot(0)))
      << "slot 0 holds block 3's new content after the retry";
  device_tiers->disk()->flush();
  host_tiers->disk()->flush();
  for (uint64_t n : {4, 7}) {
    std::vector<std::byte> d(format.block_bytes), h(format.block_bytes);
    ASSERT_TRUE(device_tiers->disk()->load(device_tiers->key(hash(n)), d).is_ok()) << "block " << n;
    ASSERT_TRUE(host_tiers->disk()->load(host_tiers->key(hash(n)), h).is_ok()) << "block " << n;
    EXPECT_TRUE(d == h) << "block " << n;
  }
}

// Moves without disk writes run on the transfer queue without the host waiting: the moves the step needs in one
// submission, which compute waits for on the device, and the loads ahead (blocks brought up for a request still
// waiting) in another beside the step's compute, unless an operation after them touches their block (then they keep
// their place in the one submission). Either way the pool and the slots end as the host executor's twin's, in the
// log's order (a block's old content demoted before the load ahead overwrites it).
TEST_F(GpuKvExecutorTest, LoadsAheadGoBesideTheStepAndKeepTheLogsOrder) {
  VulkanKvAllocator allocator(*context_), host_tier(*context_, GpuMemory::kHostCached);
  const KvCacheSpec spec{
      .num_layers = 2, .num_kv_heads = 2, .head_dim = 16, .dtype = {KvDType::kF16, KvDType::kF16}, .block_size = 8};
  const KvHeadShare share{.num_layers = 2, .model_kv_heads = 2, .first = 0, .count = 2};
  std::vector<KvStorage> device, host;
  device.emplace_back(spec, 6, 0, allocator);
  host.emplace_back(spec, 6);
  std::mt19937 rng(13);
  fill_both(host[0], device[0], rng);
  const size_t block_bytes = host[0].block_bytes();
  HostSlabs device_slabs(8 * block_bytes, &host_tier), host_slabs(8 * block_bytes);
  device_slabs.set_block_bytes(block_bytes);
  host_slabs.set_block_bytes(block_bytes);
  for (size_t slot = 0; slot < 8; ++slot) {  // the same bytes in both tiers' slots
    std::span<std::byte> d = device_slabs.slot(slot), h = host_slabs.slot(slot);
    for (size_t b = 0; b < d.size(); ++b) d[b] = h[b] = static_cast<std::byte>(rng());
  }
  SteadyClock clock;
  VulkanKvExecutor executor(*context_, allocator, host_tier, device,
                            std::make_unique<HostKvExecutor>(device, share, KeyRotation{}, clock), KeyRotation{},
                            share);
  HostKvExecutor twin(host, share, KeyRotation{}, clock);
  executor.attach_tiers(&device_slabs, nullptr);
  twin.attach_tiers(&host_slabs, nullptr);
  const auto expect_twins = [&](const char* what) {
    ASSERT_TRUE(executor.wait_for_transfers());
    EXPECT_TRUE(pool_bytes(device[0]) == pool_bytes(host[0])) << what;
    for (size_t slot = 0; slot < 8; ++slot)
      EXPECT_TRUE(std::ranges::equal(device_slabs.slot(slot), host_slabs.slot(slot))) << what << ", slot " << slot;
  };
  // Block 2's old content goes to slot 6, then slot 1 is loaded into it ahead; block 4 is loaded for this step.
  const std::vector<KvOp> beside{KvBlockToHost{.block = BlockId{2}, .host_slot = 6},
                                 KvHostToBlock{.host_slot = 1, .block = BlockId{2}, .ahead = true},
                                 KvHostToBlock{.host_slot = 3, .block = BlockId{4}}};
  const uint64_t before = context_->transfers_submitted();
  ASSERT_TRUE(executor.apply(beside));
  ASSERT_TRUE(twin.apply(beside));
  EXPECT_EQ(context_->transfers_submitted(), before + 2) << "the load ahead in a submission of its own";
  expect_twins("a load ahead beside the step");
  // The block loaded ahead is demoted again later in the log: the load keeps its place.
  const std::vector<KvOp> in_order{KvHostToBlock{.host_slot = 2, .block = BlockId{5}, .ahead = true},
                                   KvHostToBlock{.host_slot = 4, .block = BlockId{0}},
                                   KvBlockToHost{.block = BlockId{5}, .host_slot = 7}};
  const uint64_t again = context_->transfers_submitted();
  ASSERT_TRUE(executor.apply(in_order));
  ASSERT_TRUE(twin.apply(in_order));
  EXPECT_EQ(context_->transfers_submitted(), again + 1) << "one submission, in the log's order";
  expect_twins("a load ahead whose block is demoted after it");
  // An empty log (a step with nothing to move) still makes the step's compute wait for the last loads ahead.
  ASSERT_TRUE(executor.apply({}));
}

}  // namespace
}  // namespace kvs
