// OpenAI's logprobs in the engine: each generated token's entry and each prompt token's (completions' echo) are the
// log-softmax, computed here in double from the logits rows the engine hands on_logits, of the token that came
// next; the alternatives are the most likely tokens of that row. A prompt that the prefix cache holds is computed
// again for its prompt logprobs (cached tokens have no logits), so a repeated request reports the same entries.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "default_model.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine_trace.h"

namespace kvs {
namespace {

// log softmax(row)[token], naive, in double.
double naive_logprob(std::span<const float> row, TokenId token) {
  double max = row[0];
  for (float v : row) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  return static_cast<double>(row[static_cast<size_t>(token)]) - max - std::log(sum);
}

struct LoggedRun {
  std::vector<TokenId> tokens;
  std::vector<TokenLogprob> logprobs, prompt_logprobs;
  std::map<size_t, std::vector<float>> rows;  // by position
  size_t cached_tokens = 0;
};

LoggedRun run(Engine& engine, RequestParams p) {
  LoggedRun r;
  p.on_logits = [&r](size_t position, std::span<const float> logits) {
    r.rows[position].assign(logits.begin(), logits.end());
  };
  auto id = engine.add_request(std::move(p), [&r](const RequestOutput& o) {
    r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    r.prompt_logprobs.insert(r.prompt_logprobs.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
    if (o.finished) r.cached_tokens = o.cached_tokens;
  });
  EXPECT_TRUE(id) << id.status().message();
  while (engine.step()) {
  }
  return r;
}

void expect_entry(const TokenLogprob& e, TokenId token, std::span<const float> row, size_t top) {
  EXPECT_EQ(e.token, token);
  EXPECT_NEAR(e.logprob, naive_logprob(row, token), 1e-5);
  ASSERT_EQ(e.top.size(), top);
  for (size_t k = 0; k < top; ++k) {
    EXPECT_NEAR(e.top[k].second, naive_logprob(row, e.top[k].first), 1e-5);
    if (k > 0) {
      EXPECT_GE(e.top[k - 1].second, e.top[k].second);
    }
  }
  if (top > 0) {
    EXPECT_EQ(e.top[0].first, argmax(row)) << "the most likely comes first";
  }
}

TEST(EngineLogprobs, GeneratedAndPromptEntriesAreTheLogSoftmaxOfTheirRows) {
  test::DefaultModel f;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.blocks = 64}});
  ASSERT_TRUE(engine) << engine.status().message();
  const std::vector<TokenId> prompt = f.random_tokens(21, 4);
  RequestParams p = test::greedy_request(prompt, 12, /*all_logits=*/true);
  p.logprobs = 5;
  p.prompt_logprobs = 3;
  const LoggedRun first = run(**engine, p);
  ASSERT_EQ(first.tokens.size(), 12u);
  ASSERT_EQ(first.logprobs.size(), first.tokens.size());
  for (size_t i = 0; i < first.tokens.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "generated token " << i);
    const auto& row = first.rows.at(prompt.size() - 1 + i);
    expect_entry(first.logprobs[i], first.tokens[i], row, 5);
    EXPECT_EQ(first.logprobs[i].top[0].first, first.tokens[i]) << "greedy draws the most likely";
  }
  ASSERT_EQ(first.prompt_logprobs.size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "prompt token " << i + 1);
    expect_entry(first.prompt_logprobs[i], prompt[i + 1], first.rows.at(i), 3);
  }
  // The same prompt again: the prefix cache holds it, but prompt logprobs compute it whole.
  const LoggedRun again = run(**engine, p);
  EXPECT_EQ(again.cached_tokens, 0u);
  ASSERT_EQ(again.prompt_logprobs.size(), first.prompt_logprobs.size());
  for (size_t i = 0; i < again.prompt_logprobs.size(); ++i)
    EXPECT_EQ(again.prompt_logprobs[i].logprob, first.prompt_logprobs[i].logprob) << i;
  // Without prompt logprobs it is a prefix hit, and the generated entries are the same.
  RequestParams plain = p;
  plain.prompt_logprobs.reset();
  const LoggedRun cached = run(**engine, plain);
  EXPECT_GT(cached.cached_tokens, 0u);
  EXPECT_TRUE(cached.prompt_logprobs.empty());
  ASSERT_EQ(cached.logprobs.size(), first.logprobs.size());
  for (size_t i = 0; i < cached.logprobs.size(); ++i)
    EXPECT_NEAR(cached.logprobs[i].logprob, first.logprobs[i].logprob, 1e-5) << i;
}

// Parallel samples share their prompt's blocks: prompt logprobs (which recompute it) are refused with them, by name.
TEST(EngineLogprobs, PromptLogprobsWithParallelSamplesAreRefused) {
  test::DefaultModel f;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.blocks = 64}});
  ASSERT_TRUE(engine);
  RequestParams p = test::greedy_request(f.random_tokens(8, 1), 4, /*all_logits=*/false);
  p.num_samples = 2;
  p.prompt_logprobs = 0;
  const auto id = (*engine)->add_request(std::move(p), [](const RequestOutput&) {});
  ASSERT_FALSE(id);
  EXPECT_NE(id.status().message().find("prompt logprobs"), std::string::npos) << id.status().message();
}

}  // namespace
}  // namespace kvs
