// Pool sizing (kv/kv_pool_layout.h), the function the engine allocates with: the layer groups of a model's windows,
// each group's spec and blocks, within a byte budget or a block count, and the figures that fall out of it checked
// against the sizing formulas (kv/kv_sizing.h) they are made of.
#include "kv/kv_pool_layout.h"

#include <gtest/gtest.h>

#include "kv/kv_sizing.h"

namespace kvs {
namespace {

// 6 layers of 2 KV heads x 16, blocks of 16 tokens, context 1024; `windows`: Gemma-3-like (5 window layers to 1
// global) or none.
KvPoolShape shape(bool windows, KvDTypes dtype = KvDType::kF16) {
  return {.spec = {.num_layers = 6, .num_kv_heads = 2, .head_dim = 16, .dtype = dtype, .block_size = 16},
          .context_length = 1024,
          .layer_windows = windows ? interleaved_windows(6, 64, 6) : std::vector<uint32_t>{},
          .identity = "test"};
}

size_t pool_bytes(const KvPoolLayout& layout) {
  size_t bytes = 0;
  for (const KvCacheConfig& g : layout.groups)
    bytes += g.num_blocks * kv_bytes_per_block(g.spec).total() + g.num_key_tails * kv_key_tail_bytes(g.spec);
  return bytes;
}

TEST(KvPoolLayout, OneGlobalGroupTakesTheWholeBudget) {
  const size_t budget = size_t{1} << 20;
  const auto layout = kv_pool_layout(shape(false), {.max_seqs = 4, .kv = {.memory_bytes = budget}});
  ASSERT_TRUE(layout) << layout.status().message();
  ASSERT_EQ(layout->groups.size(), 1u);
  const KvCacheConfig& g = layout->groups[0];
  EXPECT_EQ(g.spec.num_layers, 6u);
  EXPECT_EQ(g.layer_window, 0u);
  EXPECT_EQ(g.num_blocks, kv_blocks_in_budget(g.spec, budget, g.num_key_tails));
  EXPECT_LE(pool_bytes(*layout), budget);
  EXPECT_TRUE(g.prefix_caching);
  EXPECT_EQ(g.model_identity, "test");
}

TEST(KvPoolLayout, WindowGroupsGetWhatTheirSequencesNeedAndTheGlobalGroupTheRest) {
  const size_t budget = size_t{4} << 20, seqs = 4, chunk = 128;
  const auto layout =
      kv_pool_layout(shape(true), {.max_seqs = seqs, .max_batch_tokens = chunk, .kv = {.memory_bytes = budget}});
  ASSERT_TRUE(layout) << layout.status().message();
  ASSERT_EQ(layout->groups.size(), 2u);
  const KvCacheConfig &global = layout->groups[0], &window = layout->groups[1];
  EXPECT_EQ(global.layer_window, 0u);
  EXPECT_EQ(global.spec.num_layers, 1u);
  EXPECT_EQ(window.layer_window, 64u);
  EXPECT_EQ(window.spec.num_layers, 5u);
  // Room for every sequence's window and a chunk: well within half the budget here, so not scaled.
  EXPECT_EQ(window.num_blocks, seqs * kv_max_blocks_per_sequence(16, 64, 1024, chunk));
  const size_t window_bytes = window.num_blocks * kv_bytes_per_block(window.spec).total();
  EXPECT_EQ(global.num_blocks, kv_blocks_in_budget(global.spec, budget - window_bytes, global.num_key_tails));
  EXPECT_LE(pool_bytes(*layout), budget);
  // With the hybrid layout off: one group of every layer, as wide as the context.
  const auto one = kv_pool_layout(shape(true), {.max_seqs = seqs, .kv = {.memory_bytes = budget, .hybrid = false}});
  ASSERT_TRUE(one);
  ASSERT_EQ(one->groups.size(), 1u);
  EXPECT_EQ(one->groups[0].spec.num_layers, 6u);
}

TEST(KvPoolLayout, AWindowGroupOverHalfTheBudgetIsScaledDown) {
  const size_t seqs = 64, chunk = 512;
  const KvPoolShape s = shape(true);
  KvCacheSpec window_spec = s.spec;
  window_spec.num_layers = 5;
  const size_t need = seqs * kv_max_blocks_per_sequence(16, 64, 1024, chunk);
  const size_t budget = need * kv_bytes_per_block(window_spec).total();  // the window group alone would take it all
  const auto layout = kv_pool_layout(s, {.max_seqs = seqs, .max_batch_tokens = chunk, .kv = {.memory_bytes = budget}});
  ASSERT_TRUE(layout) << layout.status().message();
  EXPECT_EQ(layout->groups[1].num_blocks, need / 2);
  EXPECT_GT(layout->groups[0].num_blocks, 0u);
  EXPECT_LE(pool_bytes(*layout), budget);
}

TEST(KvPoolLayout, ABlockCountSizesTheGlobalGroupAndCapsTheWindowGroups) {
  const auto layout = kv_pool_layout(shape(true), {.max_seqs = 2, .kv = {.blocks = 10}});
  ASSERT_TRUE(layout) << layout.status().message();
  EXPECT_EQ(layout->groups[0].num_blocks, 10u);
  EXPECT_EQ(layout->groups[1].num_blocks, std::min<size_t>(10, 2 * kv_max_blocks_per_sequence(16, 64, 1024, 512)));
}

TEST(KvPoolLayout, KeysQuantizedPerChannelGetKeyTailsPerSequence) {
  KvPoolShape s = shape(false, KvDType::kInt8);
  s.spec.key_scale_axis = KvScaleAxis::kPerChannel;
  const auto layout = kv_pool_layout(s, {.max_seqs = 3, .kv = {.memory_bytes = size_t{1} << 20}});
  ASSERT_TRUE(layout) << layout.status().message();
  EXPECT_EQ(layout->groups[0].num_key_tails, kv_key_tails_for_sequences(layout->groups[0].spec, 3));
  EXPECT_GT(layout->groups[0].num_key_tails, 0u);
}

TEST(KvPoolLayout, ABudgetBelowOneBlockIsAnErrorNamingTheBlock) {
  const auto layout = kv_pool_layout(shape(false), {.kv = {.memory_bytes = 100}});
  ASSERT_FALSE(layout);
  EXPECT_EQ(layout.status().code(), ErrorCode::kOutOfMemory);
  const std::string block = std::to_string(kv_bytes_per_block(shape(false).spec).total());
  EXPECT_NE(layout.status().message().find("no block of " + block + " bytes"), std::string::npos)
      << layout.status().message();
  EXPECT_NE(layout.status().message().find("a KV budget of 100 bytes"), std::string::npos);
}

TEST(KvPoolLayout, TheContiguousLayoutHasOneGroupAndNoPrefixCache) {
  KvPoolShape s = shape(true);
  s.spec.contiguous = true;
  s.spec.block_size = 1024;
  const auto layout = kv_pool_layout(s, {.max_seqs = 2, .kv = {.blocks = 2}});
  ASSERT_TRUE(layout) << layout.status().message();
  ASSERT_EQ(layout->groups.size(), 1u);
  EXPECT_FALSE(layout->groups[0].prefix_caching);
}

}  // namespace
}  // namespace kvs
