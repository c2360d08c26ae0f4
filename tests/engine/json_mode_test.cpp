// JSON mode on the default model (a story model that never writes JSON unprompted): every output is drawn among
// the tokens that continue one JSON object and that leave one max_tokens can still close, so every output, greedy,
// sampled over many seeds, parallel samples, under budgets from 2 to 400 tokens, is one JSON object (nlohmann
// parses it) and ends as complete within its budget; batched equals alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "default_model.h"
#include "engine/engine.h"
#include "engine_trace.h"

namespace kvs {
namespace {

struct Output {
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::kLength;
};

// Every request at once on one engine; outputs by request and sample.
std::vector<std::vector<Output>> run_all(test::DefaultModel& f, const std::vector<RequestParams>& requests) {
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv_blocks = 256});
  EXPECT_TRUE(engine) << engine.status().message();
  std::vector<std::vector<Output>> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i].resize(requests[i].num_samples);
    auto id = (*engine)->add_request(requests[i], [&out, i](const RequestOutput& o) {
      EXPECT_TRUE(o.error.is_ok()) << o.error.message();
      Output& s = out[i][o.sample];
      s.tokens.insert(s.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) s.reason = o.finish_reason;
    });
    EXPECT_TRUE(id) << id.status().message();
  }
  while ((*engine)->step()) {
  }
  return out;
}

RequestParams json_request(const test::DefaultModel& f, float temperature, uint64_t seed, size_t samples = 1,
                           size_t max_tokens = 400) {
  RequestParams p;
  p.prompt = f.tokenizer->encode("Once upon a time", true);
  p.max_new_tokens = max_tokens;
  p.sampling = {.temperature = temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed};
  p.num_samples = samples;
  p.json_object = true;
  return p;
}

void expect_whole_object(const test::DefaultModel& f, const Output& o, size_t max_tokens) {
  std::string text;
  for (TokenId t : o.tokens) text += f.tokenizer->token_bytes(t);
  EXPECT_EQ(o.reason, FinishReason::kDocumentComplete) << text;
  EXPECT_LE(o.tokens.size(), max_tokens);
  EXPECT_TRUE(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_object()) << text;
}

TEST(JsonMode, EveryOutputIsOneJsonObjectWithinItsBudget) {
  test::DefaultModel f;
  std::vector<RequestParams> requests = {json_request(f, 0.0f, 0)};
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const size_t budgets[] = {2, 3, 7, 20, 60, 400};
    requests.push_back(json_request(f, 1.0f, seed, 1, budgets[seed % std::size(budgets)]));
  }
  requests.push_back(json_request(f, 0.8f, 99, /*samples=*/3));
  const auto batched = run_all(f, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    for (const Output& o : batched[i]) expect_whole_object(f, o, requests[i].max_new_tokens);
  }
  for (size_t i : {0u, 5u, 25u}) EXPECT_EQ(run_all(f, {requests[i]})[0][0].tokens, batched[i][0].tokens) << i;
}

TEST(JsonMode, ABudgetTooSmallForAnObjectIsRefused) {
  test::DefaultModel f;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv_blocks = 64});
  ASSERT_TRUE(engine);
  const auto id = (*engine)->add_request(json_request(f, 0.0f, 0, 1, 1), [](const RequestOutput&) {});
  ASSERT_FALSE(id);
  EXPECT_NE(id.status().message().find("max_tokens is 1"), std::string::npos) << id.status().message();
}

}  // namespace
}  // namespace kvs
