// KvStorage: what the manager accepts, the storage it describes, memory from an injected allocator,
// and the byte layout of the format (rows, head-blocks, scales after the data) for every element type.
#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"
#include "kv/kv_sizing.h"

namespace kvs {
namespace {

// Every K/V element type the calculator sizes is stored, K and V each their own; an MLA latent is
// sized by the calculator only.
TEST(KvStorage, TheManagerTakesEveryTypeAndAnMlaLatent) {
  for (const KvDTypes type : {KvDTypes(KvDType::kInt8), KvDTypes(KvDType::kInt4), {KvDType::kF16, KvDType::kInt8}}) {
    auto m = KvCacheManager::create(
        {.spec = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .dtype = type, .block_size = 16},
         .num_blocks = 4,
         .num_key_tails = 2});
    ASSERT_TRUE(m) << m.status().message();
    const KvCacheConfig& c = (*m)->config();
    const KvStorage kv(c.spec, c.num_blocks, c.num_key_tails);
    EXPECT_EQ(kv.format().k.element, type.k);
    EXPECT_EQ(kv.format().v->element, type.v);
    // Quantized keys (per channel) have key tails: one group of 16 fp16 rows of 8 elements each.
    const size_t tails = kv_dtype_quantized(type.k) ? 2 : 0;
    EXPECT_EQ(kv.num_key_tails(), tails);
    EXPECT_EQ(kv_key_tail_bytes(c.spec), kv_dtype_quantized(type.k) ? 16u * 8 * 2 : 0u);
    EXPECT_EQ(kv.bytes(), 4 * kv_bytes_per_block(c.spec).total() + tails * kv_key_tail_bytes(c.spec));
    EXPECT_EQ(kv.bytes(), (*m)->usage().bytes_total);
  }
  // An MLA latent: one pool per layer of one head-block per block, rows of latent + rope, no values.
  auto mla = KvCacheManager::create(
      {.spec = {.num_layers = 2, .mla = true, .kv_lora_rank = 16, .rope_dim = 8, .block_size = 16}, .num_blocks = 4});
  ASSERT_TRUE(mla) << mla.status().message();
  const KvStorage latent((*mla)->config().spec, 4);
  EXPECT_FALSE(latent.has_values());
  EXPECT_EQ(latent.format().k.width, 24u);
  EXPECT_EQ(latent.bytes(), 4u * 2 * 16 * 24 * 4);
  EXPECT_EQ(latent.bytes(), (*mla)->usage().bytes_total);
}

// A real allocator that records what it hands out: the storage asks for one region per layer and tensor,
// of the format's bytes, and gives every one back when it goes.
class RecordingAllocator final : public KvAllocator {
 public:
  std::unique_ptr<KvRegion> allocate(size_t bytes) override {
    ++regions;
    total += bytes;
    return host_.allocate(bytes);
  }
  size_t regions = 0, total = 0;

 private:
  HostKvAllocator host_;
};

TEST(KvStorage, TakesItsMemoryFromTheInjectedAllocator) {
  const KvCacheSpec spec{.num_layers = 3, .num_kv_heads = 2, .head_dim = 16, .dtype = KvDType::kBF16, .block_size = 8};
  RecordingAllocator allocator;
  {
    KvStorage kv(spec, 10, 0, allocator);
    EXPECT_EQ(allocator.regions, 3u * 2);  // K and V of each layer
    EXPECT_EQ(allocator.total, kv.bytes());
    EXPECT_EQ(allocator.total, 10 * kv_bytes_per_block(spec).total());
    // The rows lie in the allocator's memory, zero-filled.
    const KvRows k = kv.keys(2, BlockId{9}, 1);
    EXPECT_EQ(static_cast<const uint16_t*>(k.data)[0], 0u);
  }
}

// Key tails are one more region, [tail][layer][kv_head][16 rows][head_dim] fp16, that the sizing counts.
TEST(KvStorage, KeyTailsLieInTheirOwnRegionAndCopyWhole) {
  const KvCacheSpec spec{.num_layers = 3, .num_kv_heads = 2, .head_dim = 32, .dtype = KvDType::kInt4, .block_size = 64};
  RecordingAllocator allocator;
  KvStorage kv(spec, 5, 3, allocator);
  EXPECT_EQ(allocator.regions, 3u * 2 + 1);
  EXPECT_EQ(kv_key_tail_bytes(spec), 3u * 2 * 16 * 32 * 2);
  EXPECT_EQ(allocator.total, 5 * kv_bytes_per_block(spec).total() + 3 * kv_key_tail_bytes(spec));
  EXPECT_EQ(kv.bytes(), allocator.total);
  EXPECT_EQ(kv.key_tail(1, 0, 0) - kv.key_tail(0, 0, 0), 3 * 2 * 16 * 32);
  EXPECT_EQ(kv.key_tail(0, 2, 1) - kv.key_tail(0, 0, 0), (2 * 2 + 1) * 16 * 32);
  EXPECT_EQ(kv.key_tail_rows(2, 1, 1).data, kv.key_tail(2, 1, 1));
  EXPECT_EQ(kv.key_tail_rows(2, 1, 1).type, KvDType::kF16);
  for (size_t l = 0; l < 3; ++l)
    for (size_t h = 0; h < 2; ++h) kv.key_tail(2, l, h)[5] = static_cast<uint16_t>(10 * l + h + 1);
  kv.copy_key_tail(2, 0);
  for (size_t l = 0; l < 3; ++l)
    for (size_t h = 0; h < 2; ++h) EXPECT_EQ(kv.key_tail(0, l, h)[5], 10 * l + h + 1);
  // The calculator's sequences: two tails each.
  EXPECT_EQ(kv_bytes_for_sequences(spec, 100, 3),
            3 * 2 * kv_bytes_per_block(spec).total() + 3 * kKeyTailsPerSequence * kv_key_tail_bytes(spec));
}

// The layout the kernels will read, for each element type and for K and V apart: rows of row_bytes back
// to back, head-blocks of data + scales, scales right after a head-block's data.
TEST(KvStorage, RowsAndHeadBlocksLieWhereTheFormatSays) {
  const KvDTypes types[] = {KvDType::kF32,
                            KvDType::kF16,
                            KvDType::kBF16,
                            KvDType::kInt8,
                            KvDType::kInt4,
                            {KvDType::kInt8, KvDType::kInt4},
                            {KvDType::kF16, KvDType::kInt8}};
  for (const KvDTypes dtype : types) {
    const KvCacheSpec spec{.num_layers = 2,
                           .num_kv_heads = 3,
                           .head_dim = 32,
                           .v_head_dim = 16,
                           .dtype = dtype,
                           .key_scale_axis = KvScaleAxis::kPerChannel,
                           .block_size = 16};
    KvStorage kv(spec, 4);
    const KvFormat& f = kv.format();
    ASSERT_TRUE(f.v.has_value());
    EXPECT_EQ(f.k.row_bytes(), 32 * kv_dtype_bits(dtype.k) / 8);
    EXPECT_EQ(f.v->row_bytes(), 16 * kv_dtype_bits(dtype.v) / 8);
    // Quantized K: an fp16 scale and min per channel for each group of 16 rows; quantized V: per row,
    // one pair for each group of 32 elements (here the whole 16-element row).
    EXPECT_EQ(f.k.scales_bytes(), kv_dtype_quantized(dtype.k) ? 32u * 4 : 0u) << kv_dtypes_name(dtype);
    EXPECT_EQ(f.v->scales_bytes(), kv_dtype_quantized(dtype.v) ? 16u * 4 : 0u) << kv_dtypes_name(dtype);
    EXPECT_EQ(f.k.head_block_bytes(), 16 * f.k.row_bytes() + f.k.scales_bytes());
    if (kv_dtype_quantized(dtype.k)) {
      const KvRows keys = kv.keys(1, BlockId{2}, 1);
      EXPECT_EQ(reinterpret_cast<const std::byte*>(keys.scales) - static_cast<const std::byte*>(keys.data),
                static_cast<ptrdiff_t>(16 * f.k.row_bytes()))
          << "the scales follow the rows";
      EXPECT_EQ(keys.axis, KvScaleAxis::kPerChannel);
      EXPECT_EQ(keys.group_size, 16u);
    }
    const auto* base = static_cast<const std::byte*>(kv.keys(1, BlockId{0}, 0).data);
    EXPECT_EQ(static_cast<const std::byte*>(kv.keys(1, BlockId{2}, 1).data) - base,
              static_cast<ptrdiff_t>((2 * 3 + 1) * f.k.head_block_bytes()));
    EXPECT_EQ(kv.key_row(1, KvSlot{2 * 16 + 5}, 1) - base,
              static_cast<ptrdiff_t>((2 * 3 + 1) * f.k.head_block_bytes() + 5 * f.k.row_bytes()));
    const auto* v_base = static_cast<const std::byte*>(kv.values(0, BlockId{0}, 0).data);
    EXPECT_EQ(kv.value_row(0, KvSlot{3 * 16 + 15}, 2) - v_base,
              static_cast<ptrdiff_t>((3 * 3 + 2) * f.v->head_block_bytes() + 15 * f.v->row_bytes()));
    EXPECT_EQ(kv.bytes(), 4 * kv_bytes_per_block(spec).total()) << kv_dtypes_name(dtype);
  }
}

// The offload tiers' unit: one block as one buffer. Written into another block it reproduces every
// head-block (elements and scales) of every layer, K and V, and touches no other block; in every format.
TEST(KvStorage, ABlockReadAsOneBufferWritesBackIntoAnotherBlockExactly) {
  const std::vector<KvCacheSpec> specs = {
      {.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .dtype = KvDType::kF32, .block_size = 16},
      {.num_layers = 2, .num_kv_heads = 3, .head_dim = 32, .dtype = {KvDType::kInt8, KvDType::kInt4}, .block_size = 16},
      {.num_layers = 3, .num_kv_heads = 1, .head_dim = 16, .dtype = KvDType::kF16, .block_size = 8},
      {.num_layers = 2, .mla = true, .kv_lora_rank = 16, .rope_dim = 8, .block_size = 16}};
  for (const KvCacheSpec& spec : specs) {
    KvStorage kv(spec, 4);
    const KvFormat& f = kv.format();
    ASSERT_EQ(kv.block_bytes(), kv_bytes_per_block(spec).total());
    // Each byte of every head-block of every block: a pattern of its block, layer, head, tensor and offset.
    const auto pattern = [](uint32_t block, size_t layer, size_t head, int tensor, size_t i) {
      return static_cast<std::byte>((block * 71 + layer * 31 + head * 13 + tensor * 7 + i) & 0xFF);
    };
    const auto for_each_head_block = [&](auto visit) {
      for (size_t l = 0; l < f.num_layers; ++l) {
        for (size_t h = 0; h < f.num_heads; ++h) {
          visit(l, h, 0, f.k.head_block_bytes());
          if (f.v) visit(l, h, 1, f.v->head_block_bytes());
        }
      }
    };
    const auto head_block = [&](uint32_t block, size_t l, size_t h, int tensor) {
      return tensor == 0 ? kv.key_head_block(l, BlockId{block}, h) : kv.value_head_block(l, BlockId{block}, h);
    };
    for (uint32_t b = 0; b < 4; ++b) {
      for_each_head_block([&](size_t l, size_t h, int t, size_t n) {
        for (size_t i = 0; i < n; ++i) head_block(b, l, h, t)[i] = pattern(b, l, h, t, i);
      });
    }
    std::vector<std::byte> buffer(kv.block_bytes());
    kv.read_block(BlockId{1}, buffer);
    kv.write_block(BlockId{2}, buffer);
    size_t checked = 0;
    for (uint32_t b = 0; b < 4; ++b) {
      const uint32_t expect_from = b == 2 ? 1 : b;
      for_each_head_block([&](size_t l, size_t h, int t, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(head_block(b, l, h, t)[i], pattern(expect_from, l, h, t, i))
              << "block " << b << " layer " << l << " head " << h << " tensor " << t << " byte " << i;
        }
        checked += b == 2 ? n : 0;
      });
    }
    EXPECT_EQ(checked, kv.block_bytes()) << "the buffer is exactly the block's head-blocks";
  }
}

}  // namespace
}  // namespace kvs
