// Paged KV cache vs the contiguous reference: same tokens and logits within 1e-5 for block sizes
// 1, 16 and 256, on the default model and synthetic GQA/MQA models; and the pool hands out
// exactly the bytes the calculator predicts.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/sampler.h"
#include "engine/sequence_runner.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

struct Trace {
  std::vector<TokenId> tokens;
  std::vector<std::vector<float>> logits;  // per step
};

// Prefill 37 tokens in chunks of 13 (so chunks straddle blocks), then 40 greedy steps.
Trace run_greedy(const LlamaModel& model, SequenceKvOptions kv) {
  ThreadPool pool(2);
  SequenceRunner runner(model, pool, 37 + 40, 13, kv);
  std::vector<TokenId> prompt = {1};
  for (int i = 0; i < 36; ++i) prompt.push_back(static_cast<TokenId>(3 + (i * 37) % 250));
  Trace trace;
  auto out = runner.append(prompt, /*all_logits=*/true);
  EXPECT_TRUE(out) << out.status().message();
  const size_t vocab = model.config().vocab_size;
  trace.logits.emplace_back(out->begin(), out->end());
  std::vector<float> last(out->end() - vocab, out->end());
  for (int step = 0; step < 40; ++step) {
    trace.tokens.push_back(argmax(last));
    const TokenId next[] = {trace.tokens.back()};
    auto o = runner.append(next);
    EXPECT_TRUE(o) << o.status().message();
    last.assign(o->begin(), o->end());
    trace.logits.push_back(last);
  }
  return trace;
}

void expect_paged_equals_contiguous(const LlamaModel& model) {
  const Trace reference = run_greedy(model, {.block_size = 0});
  for (size_t block_size : {1u, 16u, 256u}) {
    SCOPED_TRACE("block size " + std::to_string(block_size));
    const Trace paged = run_greedy(model, {.block_size = block_size});
    EXPECT_EQ(paged.tokens, reference.tokens);
    ASSERT_EQ(paged.logits.size(), reference.logits.size());
    float worst = 0.0f;
    for (size_t s = 0; s < paged.logits.size(); ++s) {
      ASSERT_EQ(paged.logits[s].size(), reference.logits[s].size());
      for (size_t i = 0; i < paged.logits[s].size(); ++i) {
        worst = std::max(worst, std::fabs(paged.logits[s][i] - reference.logits[s][i]));
      }
    }
    EXPECT_LE(worst, 1e-5f);
  }
}

TEST(PagedKv, DefaultModelMatchesContiguous) {
  auto model = LlamaModel::load(test::default_model_path());
  ASSERT_TRUE(model) << model.status().message();
  expect_paged_equals_contiguous(**model);
}

class PagedKvSynth : public ::testing::TestWithParam<std::string> {};

TEST_P(PagedKvSynth, MatchesContiguous) {
  test::TempDir dir("paged_" + GetParam());
  auto spec = synth_preset(GetParam());
  ASSERT_TRUE(spec);
  ASSERT_TRUE(write_synth_model(*spec, dir.file("m.gguf")).is_ok());
  auto model = LlamaModel::load(dir.file("m.gguf"));
  ASSERT_TRUE(model) << model.status().message();
  expect_paged_equals_contiguous(**model);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedKvSynth, ::testing::Values("tiny-gqa", "tiny-mqa"),
                         [](const auto& info) { return info.param == "tiny-gqa" ? "gqa" : "mqa"; });

// One sizing function: the bytes the pool handed out equal the calculator's block-rounded
// prediction, for sequences of several lengths and block sizes.
TEST(PagedKv, AllocatedBytesEqualTheCalculatorPrediction) {
  auto model = LlamaModel::load(test::default_model_path());
  ASSERT_TRUE(model);
  const ModelConfig& c = (*model)->config();
  ThreadPool pool(1);
  for (size_t block_size : {1u, 16u, 256u}) {
    for (size_t length : {1u, 15u, 16u, 17u, 100u, 257u}) {
      SequenceRunner runner(**model, pool, 300, 64, {.block_size = block_size, .num_blocks = 400});
      std::vector<TokenId> tokens(length, 300);
      tokens[0] = 1;
      ASSERT_TRUE(runner.append(tokens));
      const KvCacheSpec spec{.num_layers = c.num_layers, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
                             .block_size = block_size};
      EXPECT_EQ(runner.kv_usage().bytes_used, kv_bytes_for_sequences(spec, length, 1))
          << "length " << length << ", block size " << block_size;
      EXPECT_EQ(runner.kv_usage().blocks_used, kv_blocks_for_tokens(length, block_size));
      EXPECT_EQ(runner.kv_bytes(), 400 * kv_bytes_per_block(spec).total());
      runner.reset();  // blocks go back the moment the sequence ends
      EXPECT_EQ(runner.kv_usage().blocks_used, 0u);
    }
  }
}

TEST(PagedKv, ExhaustionIsAnErrorValueNotACrash) {
  auto model = LlamaModel::load(test::default_model_path());
  ASSERT_TRUE(model);
  ThreadPool pool(1);
  SequenceRunner runner(**model, pool, 512, 64, {.block_size = 16, .num_blocks = 2});
  std::vector<TokenId> tokens(32, 300);
  ASSERT_TRUE(runner.append(tokens));
  const TokenId one[] = {300};
  auto more = runner.append(one);
  ASSERT_FALSE(more);
  EXPECT_EQ(more.status().code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(more.status().message().find("0 of 2 blocks are free"), std::string::npos) << more.status().message();
  EXPECT_EQ(runner.length(), 32u);  // nothing lost
  runner.truncate(20);               // frees block 1 ... then there is room again
  EXPECT_EQ(runner.kv_usage().blocks_used, 2u);
  runner.truncate(16);
  EXPECT_EQ(runner.kv_usage().blocks_used, 1u);
  EXPECT_TRUE(runner.append(one));
}

}  // namespace
}  // namespace kvs
