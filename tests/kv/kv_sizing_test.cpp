#include "kv/kv_sizing.h"

#include <gtest/gtest.h>

#include "kv/kv_presets.h"

namespace kvs {
namespace {

KvCacheSpec preset(std::string_view name) {
  for (const auto& p : kv_model_presets())
    if (p.name == name) return p.spec;
  ADD_FAILURE() << "no preset " << name;
  return {};
}

TEST(KvSizing, Llama2_7bFp16_2048TokensIsOneGiB) {
  KvCacheSpec s = preset("llama-2-7b");
  s.dtype = KvDType::kF16;
  EXPECT_EQ(kv_bytes_for_sequences(s, 2048, 1), 1'073'741'824u);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s), 32.0 * 32 * 128 * 2 * 2);  // 512 KiB per token
}

TEST(KvSizing, Llama3_70bFp16_128kTokens) {
  KvCacheSpec s = preset("llama-3-70b");
  s.dtype = KvDType::kF16;
  EXPECT_EQ(kv_bytes_for_sequences(s, 128'000, 1), 41'943'040'000u);
  EXPECT_NEAR(kv_bytes_for_sequences(s, 128'000, 1) / double(1ull << 30), 39.06, 0.005);
}

TEST(KvSizing, BlockRoundingChargesWholeBlocks) {
  KvCacheSpec s{.num_layers = 2, .num_kv_heads = 1, .head_dim = 4, .block_size = 16};
  const size_t per_block = 2 * 2 * 16 * 4 * 4;  // layers x K,V x slots x dim x f32
  EXPECT_EQ(kv_bytes_per_block(s).total(), per_block);
  EXPECT_EQ(kv_bytes_for_sequences(s, 1, 1), per_block);
  EXPECT_EQ(kv_bytes_for_sequences(s, 16, 1), per_block);
  EXPECT_EQ(kv_bytes_for_sequences(s, 17, 3), 3 * 2 * per_block);
}

TEST(KvSizing, MlaCachesOneLatentPerToken) {
  KvCacheSpec s = preset("deepseek-v2-lite");
  s.dtype = KvDType::kF16;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s), 27.0 * (512 + 64) * 2);
}

TEST(KvSizing, QuantizedTypesCountTheirScales) {
  KvCacheSpec s{.num_layers = 1, .num_kv_heads = 2, .head_dim = 64, .dtype = KvDType::kInt8, .block_size = 16};
  const KvBlockBytes b = kv_bytes_per_block(s);
  EXPECT_EQ(b.data, 2u * 16 * 2 * 64);  // K and V, one byte each
  // An fp16 scale and min: K per channel for the block's 16 rows, V per token for each 32 elements.
  EXPECT_EQ(b.scales, 2u * (64 * 4 + 16 * 2 * 4));
  s.dtype = KvDType::kInt4;
  EXPECT_EQ(kv_bytes_per_block(s).data, 2u * 16 * 2 * 64 / 2);
  s.key_scale_axis = KvScaleAxis::kPerToken;  // K like V
  EXPECT_EQ(kv_bytes_per_block(s).scales, 2u * 2 * 16 * 2 * 4);
  s.key_scale_axis = KvScaleAxis::kPerChannel;
  s.block_size = 64;  // per-channel groups stay at 16 rows
  EXPECT_EQ(kv_bytes_per_block(s).scales, 2u * (4 * 64 * 4 + 64 * 2 * 4));
}

// K and V each their own: K int8 (per-channel scales) with V f16 (none), and a value row narrower than a key row.
TEST(KvSizing, KeysAndValuesAreSizedApart) {
  KvCacheSpec s{.num_layers = 3,
                .num_kv_heads = 2,
                .head_dim = 64,
                .v_head_dim = 32,
                .dtype = {KvDType::kInt8, KvDType::kF16},
                .key_scale_axis = KvScaleAxis::kPerChannel,
                .block_size = 16};
  const KvBlockBytes b = kv_bytes_per_block(s);
  EXPECT_EQ(b.data, 3u * 2 * 16 * (64 * 1 + 32 * 2));
  EXPECT_EQ(b.scales, 3u * 2 * 64 * 4);
  EXPECT_EQ(kv_dtypes_name(s.dtype), "k int8 / v f16");
  s.dtype = {KvDType::kF16, KvDType::kInt4};
  s.v_head_dim = 31;
  EXPECT_NE(s.validate().message().find("even value head dim, got 31"), std::string::npos) << s.validate().message();
}

TEST(KvSizing, MaxSequencesInBudget) {
  KvCacheSpec s = preset("llama-2-7b");
  s.dtype = KvDType::kF16;
  EXPECT_EQ(kv_max_seqs_in_budget(s, 2048, 8ull << 30), 8u);
  EXPECT_EQ(kv_max_seqs_in_budget(s, 2049, 8ull << 30), 7u);  // one more block each
}

TEST(KvSizing, BlockSizeMustBeAPowerOfTwoUpTo256) {
  KvCacheSpec s{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8};
  for (size_t ok : {1u, 2u, 16u, 256u}) {
    s.block_size = ok;
    EXPECT_TRUE(s.validate().is_ok()) << ok;
  }
  for (size_t bad : {0u, 3u, 24u, 512u}) {
    s.block_size = bad;
    EXPECT_NE(s.validate().message().find(std::to_string(bad)), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace kvs
