// int8 / int4 K/V through the engine, on the default model (GQA, head dim 8: the reference kernels) and
// on synthetic GQA, MQA and MHA models of head dim 64 (the fused SIMD kernels): paged equals contiguous,
// a prefix hit equals a miss, and the perplexity stays within the bounds of the f32 cache's
// (int8 0.5%, int4 5%), for K and V alike, mixed pairs, keys per channel or per token, rotated keys.
//
// Bounds: the same rows are quantized to the same bits whatever the layout or the cache hit (per-token
// rows on their own; per-channel groups of 16 rows align with the blocks and are copied whole), so what
// differs is the order of fp32 sums, as for the floating types: the 1e-5 of paged_kv_test.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine_trace.h"
#include "eval/perplexity.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

struct QuantChoice {
  const char* name;
  KvDTypes dtype;
  KvScaleAxis key_scales = KvScaleAxis::kPerChannel;
  bool rotate_keys = false;
  double max_perplexity_increase = 0.0;  // the bound this variant meets on the default model; 0: none
};

const QuantChoice kChoices[] = {
    {"int8", KvDType::kInt8, KvScaleAxis::kPerChannel, false, 0.005},
    {"int8, keys per token", KvDType::kInt8, KvScaleAxis::kPerToken, false, 0.005},
    {"int4", KvDType::kInt4, KvScaleAxis::kPerChannel, false, 0.05},
    {"k int8 / v int4", {KvDType::kInt8, KvDType::kInt4}, KvScaleAxis::kPerChannel, false, 0.05},
    // Per-token int4 keys lose the default model's outlier channels (head dim 8: a group is the whole
    // row); rotating 8 channels does not save them. Measured, not bounded.
    {"int4, keys per token", KvDType::kInt4, KvScaleAxis::kPerToken},
    {"int4, keys per token, rotated", KvDType::kInt4, KvScaleAxis::kPerToken, true},
};

EngineConfig config_of(const QuantChoice& q, size_t block_size, KvLayout layout) {
  return {.max_batch_tokens = 13,
          .max_seqs = 1,
          .kv = {.block_size = block_size,
                 .layout = layout,
                 .dtype = q.dtype,
                 .key_scales = q.key_scales,
                 .rotate_keys = q.rotate_keys}};
}

std::vector<TokenId> prompt_of(size_t n, TokenId salt) {
  std::vector<TokenId> prompt = {1};
  for (size_t i = 1; i < n; ++i) prompt.push_back(static_cast<TokenId>(3 + (i * 37 + salt) % 250));
  return prompt;
}

class QuantizedKv : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "default") {
      auto model = DecoderModel::load(test::default_model_path());
      ASSERT_TRUE(model) << model.status().message();
      model_ = std::move(model).value();
    } else {
      // Head dim 64 (the fused kernels), as GQA (4 query heads on 2 KV heads), MQA (1) or MHA (4).
      const uint32_t kv_heads = GetParam() == "mqa_head_dim_64" ? 1 : GetParam() == "mha_head_dim_64" ? 4 : 2;
      const SynthSpec spec{
          .layers = 2, .dim = 256, .heads = 4, .kv_heads = kv_heads, .ffn = 256, .vocab = 512, .ctx = 512};
      ASSERT_TRUE(write_synth_model(spec, dir_.file("m.gguf")).is_ok());
      auto model = DecoderModel::load(dir_.file("m.gguf"));
      ASSERT_TRUE(model) << model.status().message();
      model_ = std::move(model).value();
    }
    auto tokenizer = Tokenizer::from_gguf(model_->file());
    ASSERT_TRUE(tokenizer) << tokenizer.status().message();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  }
  test::EngineTrace trace(const EngineConfig& config, std::vector<TokenId> prompt, size_t new_tokens) {
    return test::trace_request(*model_, *tokenizer_, pool_, config,
                               test::greedy_request(std::move(prompt), new_tokens));
  }
  static std::string test_dir_name() {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    return "quantized_kv_" + name;
  }

  test::TempDir dir_{test_dir_name()};
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ThreadPool pool_{2};
};

TEST_P(QuantizedKv, PagedEqualsContiguous) {
  for (const QuantChoice& q : kChoices) {
    SCOPED_TRACE(q.name);
    const test::EngineTrace contiguous = trace(config_of(q, 16, KvLayout::kContiguous), prompt_of(37, 0), 41);
    const test::EngineTrace paged = trace(config_of(q, 16, KvLayout::kPaged), prompt_of(37, 0), 41);
    ASSERT_EQ(contiguous.logits.size(), 37u + 40u);
    EXPECT_EQ(paged.tokens, contiguous.tokens);
    EXPECT_LE(test::worst_logit_difference(paged, contiguous), 1e-5f);
  }
}

// Keys quantized per channel wait in 16 bits until their group of 16 rows is complete: with f16 values,
// every position before the first group completes has the f16 cache's logits bit for bit (the same
// fp16 rows through the same kernel), and the positions after it do not (the keys are quantized).
TEST_P(QuantizedKv, AFillingKeyGroupIsReadInSixteenBits) {
  for (const KvDType keys : {KvDType::kInt8, KvDType::kInt4}) {
    for (const KvLayout layout : {KvLayout::kPaged, KvLayout::kContiguous}) {
      SCOPED_TRACE(testing::Message() << kv_dtype_name(keys)
                                      << (layout == KvLayout::kPaged ? " paged" : " contiguous"));
      const QuantChoice quantized{"", {keys, KvDType::kF16}}, half{"", KvDType::kF16};
      const test::EngineTrace a = trace(config_of(quantized, 16, layout), prompt_of(12, 0), 12);
      const test::EngineTrace b = trace(config_of(half, 16, layout), prompt_of(12, 0), 12);
      ASSERT_EQ(a.logits.size(), 12u + 11u);
      bool differs_after = false;
      for (const auto& [position, logits] : a.logits) {
        if (position < 15) {
          ASSERT_EQ(logits, b.logits.at(position)) << "position " << position;
        } else {
          differs_after |= logits != b.logits.at(position);
        }
      }
      EXPECT_TRUE(differs_after) << "the keys of positions 0..15 are quantized once the group is complete";
    }
  }
}

// A second prompt shares 37 tokens with the first (two whole blocks and 5 slots of a third): with the
// cache it takes them (per-channel keys: the two whole blocks only) and computes the rest; its logits
// equal those of the same prompt on a fresh engine without a cache.
TEST_P(QuantizedKv, APrefixHitEqualsAMiss) {
  for (const QuantChoice& q : kChoices) {
    SCOPED_TRACE(q.name);
    EngineConfig config = config_of(q, 16, KvLayout::kPaged);
    config.max_batch_tokens = 512;
    auto engine = Engine::create(*model_, *tokenizer_, pool_, config);
    ASSERT_TRUE(engine) << engine.status().message();
    ASSERT_TRUE(generate(**engine, test::greedy_request(prompt_of(60, 0), 1, false)));
    std::vector<TokenId> second = prompt_of(37, 0);
    for (TokenId t : prompt_of(20, 11)) second.push_back(t);
    test::EngineTrace hit;
    RequestParams params = test::greedy_request(second, 20);
    params.on_logits = [&](size_t position, std::span<const float> logits) {
      hit.logits[position].assign(logits.begin(), logits.end());
    };
    auto result = generate(**engine, std::move(params));
    ASSERT_TRUE(result) << result.status().message();
    EXPECT_EQ(result->cached_tokens, q.key_scales == KvScaleAxis::kPerChannel ? 32u : 37u);
    hit.tokens = result->tokens;
    config.kv.prefix_caching = false;
    const test::EngineTrace miss = trace(config, second, 20);
    EXPECT_EQ(hit.tokens, miss.tokens);
    float worst = 0.0f;
    for (const auto& [position, row] : hit.logits) {
      const auto& ref = miss.logits.at(position);
      for (size_t i = 0; i < row.size(); ++i) worst = std::max(worst, std::fabs(row[i] - ref[i]));
    }
    EXPECT_LE(worst, 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizedKv,
                         ::testing::Values("default", "gqa_head_dim_64", "mqa_head_dim_64", "mha_head_dim_64"),
                         [](const auto& info) { return info.param; });

// The quality bounds on the trained default model: the perplexity of 4 chunks of 256 held-out
// tokens with int8 K/V within 0.5% of the f32 cache's, int4 (keys per channel) within 5%; the other
// variants are printed (the full table, with KL divergences: docs/KV_CACHE.md).
TEST(QuantizedKvQuality, PerplexityStaysWithinTheBoundsOfTheF32Cache) {
  auto model = DecoderModel::load(test::default_model_path());
  ASSERT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer);
  std::ifstream in(test::shared_path("eval/tinystories_heldout.txt"));
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  ThreadPool pool(2);
  for (const QuantChoice& q : kChoices) {
    SCOPED_TRACE(q.name);
    const PerplexityOptions options{.chunk_tokens = 256,
                                    .max_chunks = 4,
                                    .kv = {.dtype = q.dtype, .key_scales = q.key_scales, .rotate_keys = q.rotate_keys},
                                    .compare_with_f32 = true};
    auto r = evaluate_perplexity(**model, *tokenizer, pool, text.str(), options);
    ASSERT_TRUE(r) << r.status().message();
    ASSERT_TRUE(r->divergence);
    const double increase = r->perplexity / r->divergence->f32_perplexity - 1.0;
    std::printf("%s: perplexity %.4f vs %.4f (%+.3f%%), mean KL %.3e, top-1 %.2f%%\n", q.name, r->perplexity,
                r->divergence->f32_perplexity, 100 * increase, r->divergence->mean_kld,
                100 * r->divergence->top1_agreement);
    if (q.max_perplexity_increase > 0) {
      EXPECT_LE(std::fabs(increase), q.max_perplexity_increase);
    }
    EXPECT_GT(r->divergence->mean_kld, 0.0) << "the K/V were not quantized";
  }
}

}  // namespace
}  // namespace kvs
