// With and without the KV cache: identical tokens (and logits within fp32 noise) on synthetic
// MHA, MQA and GQA models and on the default model.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine_trace.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

// The engine's no-cache baseline (every step recomputes the history) against the cache, same sampling seed.
void expect_cache_equals_no_cache(const DecoderModel& model, const Tokenizer& tokenizer, float temperature) {
  ThreadPool pool(2);
  RequestParams params;
  params.prompt = tokenizer.encode("Once upon a time there was a dog", true);
  params.max_new_tokens = 48;
  params.stop_at_eos = false;
  params.sampling = {.temperature = temperature, .top_k = 40, .top_p = 0.95f, .min_p = 0.0f, .seed = 42};
  const test::EngineTrace cached = test::trace_request(model, tokenizer, pool, {.max_seqs = 1}, params);
  params.recompute_history = true;
  const test::EngineTrace uncached = test::trace_request(model, tokenizer, pool, {.max_seqs = 1}, params);
  EXPECT_EQ(cached.tokens, uncached.tokens);
  EXPECT_EQ(cached.result.text, uncached.result.text);
  ASSERT_EQ(cached.tokens.size(), 48u);
  // The comparison means something only if the model says something varied.
  EXPECT_GE(std::set<TokenId>(cached.tokens.begin(), cached.tokens.end()).size(), 4u);
}

// Logits of decode with the cache vs a full recomputation at every step (the engine's baseline), greedy.
void expect_logits_match_recompute(const DecoderModel& model, const Tokenizer& tokenizer) {
  ThreadPool pool(1);
  RequestParams params = test::greedy_request({1, 300, 301, 302, 303}, 21, /*all_logits=*/false);
  const test::EngineTrace cached = test::trace_request(model, tokenizer, pool, {.max_seqs = 1}, params);
  params.recompute_history = true;
  const test::EngineTrace fresh = test::trace_request(model, tokenizer, pool, {.max_seqs = 1}, params);
  EXPECT_EQ(cached.tokens, fresh.tokens);
  ASSERT_EQ(cached.logits.size(), 21u);  // the prompt's last token and 20 decode steps
  EXPECT_LE(test::worst_logit_difference(cached, fresh), 1e-4f);
}

class SynthKvCacheTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthKvCacheTest, CacheAndNoCacheGiveIdenticalTokens) {
  test::TempDir dir("kv_cache_" + GetParam());
  auto spec = synth_preset(GetParam());
  ASSERT_TRUE(spec) << spec.status().message();
  const std::string path = dir.file("model.gguf");
  ASSERT_TRUE(write_synth_model(*spec, path).is_ok());
  const test::LoadedModel m = test::load_model(path);
  ASSERT_TRUE(m.model && m.tokenizer);
  EXPECT_EQ(m.model->config().num_kv_heads, spec->kv_heads);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 0.0f);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 0.9f);
  expect_logits_match_recompute(*m.model, *m.tokenizer);
}

INSTANTIATE_TEST_SUITE_P(Attention, SynthKvCacheTest, ::testing::Values("tiny-mha", "tiny-mqa", "tiny-gqa"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name.erase(0, 5);  // "tiny-"
                           return name;
                         });

TEST(DefaultModelKvCache, CacheAndNoCacheGiveIdenticalTokens) {
  const test::LoadedModel m = test::load_model(test::default_model_path());
  ASSERT_TRUE(m.model && m.tokenizer);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 0.0f);
  expect_cache_equals_no_cache(*m.model, *m.tokenizer, 1.0f);
  expect_logits_match_recompute(*m.model, *m.tokenizer);
}

}  // namespace
}  // namespace kvs
