// With and without the KV cache: identical tokens (and logits within fp32 noise) on synthetic
// MHA, MQA and GQA models and on the default model.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/generator.h"
#include "engine/sequence_runner.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

struct LoadedForTest {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

LoadedForTest load(const std::string& path) {
  auto model = LlamaModel::load(path);
  EXPECT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  EXPECT_TRUE(tokenizer) << tokenizer.status().message();
  return {std::move(model).value(), std::make_unique<Tokenizer>(std::move(tokenizer).value())};
}

void expect_cache_equals_no_cache(const LlamaModel& model, const Tokenizer& tokenizer, float temperature) {
  ThreadPool pool(2);
  Generator generator(model, tokenizer, pool);
  const std::vector<TokenId> prompt = tokenizer.encode("Once upon a time there was a dog", true);
  GenerationOptions options;
  options.max_new_tokens = 48;
  options.stop_at_eos = false;
  options.sampling = {.temperature = temperature, .top_k = 40, .top_p = 0.95f, .min_p = 0.0f, .seed = 42};
  options.use_kv_cache = true;
  auto cached = generator.generate(prompt, options);
  options.use_kv_cache = false;
  auto uncached = generator.generate(prompt, options);
  ASSERT_TRUE(cached && uncached);
  EXPECT_EQ(cached->tokens, uncached->tokens);
  EXPECT_EQ(cached->text, uncached->text);
  // The comparison means something only if the model says something varied.
  EXPECT_GE(std::set<TokenId>(cached->tokens.begin(), cached->tokens.end()).size(), 4u);
}

// Logits of decode-with-cache vs a full recomputation at every step.
void expect_logits_match_recompute(const LlamaModel& model) {
  ThreadPool pool(1);
  const size_t vocab = model.config().vocab_size;
  std::vector<TokenId> tokens = {1, 300, 301, 302, 303};
  SequenceRunner cached(model, pool, 64);
  auto out = *cached.append(tokens);
  std::vector<float> logits(out.begin(), out.end());
  for (int step = 0; step < 20; ++step) {
    SequenceRunner fresh(model, pool, tokens.size());
    auto full = *fresh.append(tokens);
    float worst = 0.0f;
    for (size_t i = 0; i < vocab; ++i) worst = std::max(worst, std::fabs(full[i] - logits[i]));
    EXPECT_LE(worst, 1e-4f) << "step " << step;
    tokens.push_back(argmax(logits));
    const TokenId next[] = {tokens.back()};
    auto o = *cached.append(next);
    logits.assign(o.begin(), o.end());
  }
}

class SynthKvCacheTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthKvCacheTest, CacheAndNoCacheGiveIdenticalTokens) {
  test::TempDir dir("kv_cache_" + GetParam());
  auto spec = synth_preset(GetParam());
  ASSERT_TRUE(spec) << spec.status().message();
  const std::string path = dir.file("model.gguf");
  ASSERT_TRUE(write_synth_model(*spec, path).is_ok());
  LoadedForTest m = load(path);
  ASSERT_TRUE(m.model && m.tokenizer);
  EXPECT_EQ(m.model->config().num_kv_heads, spec->kv_heads);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 0.0f);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 0.9f);
  expect_logits_match_recompute(*m.model);
}

INSTANTIATE_TEST_SUITE_P(Attention, SynthKvCacheTest, ::testing::Values("tiny-mha", "tiny-mqa", "tiny-gqa"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name.erase(0, 5);  // "tiny-"
                           return name;
                         });

TEST(DefaultModelKvCache, CacheAndNoCacheGiveIdenticalTokens) {
  LoadedForTest m = load(test::default_model_path());
  ASSERT_TRUE(m.model && m.tokenizer);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 0.0f);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 1.0f);
  expect_logits_match_recompute(*m.model);
}

}  // namespace
}  // namespace kvs
