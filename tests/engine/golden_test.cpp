// Golden tests: greedy ids and logits of stories260K against the independent fp32 reference
// (../shared/reference/stories260K/greedy.jsonl), for our converted model and llama.cpp's file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine_trace.h"
#include "test_support.h"

namespace kvs {
namespace {

struct GoldenCase {
  std::string prompt;
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> greedy_ids;
  std::map<size_t, std::vector<float>> logits;  // position -> logits after feeding that token
};

std::vector<GoldenCase> load_cases() {
  std::vector<GoldenCase> cases;
  for (const auto& j : test::read_jsonl(test::shared_path("reference/stories260K/greedy.jsonl"))) {
    GoldenCase c{j["prompt"].get<std::string>(),
                 j["prompt_ids"].get<std::vector<TokenId>>(),
                 j["greedy_ids"].get<std::vector<TokenId>>(),
                 {}};
    for (const auto& [key, value] : j["logits_checkpoints"].items())
      c.logits[std::stoul(key)] = value.get<std::vector<float>>();
    cases.push_back(std::move(c));
  }
  return cases;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

void expect_logits_near(std::span<const float> got, const std::vector<float>& want, size_t position) {
  ASSERT_EQ(got.size(), want.size());
  float worst = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 1e-4f) << "max |logit - reference| at position " << position;
}

// Prefill (in chunks of `chunk` tokens, capturing every logit row) then greedy decode with the cache, on the
// engine with `kv_dtype` K/V.
test::EngineTrace run_case(const DecoderModel& model, ThreadPool& pool, const GoldenCase& c, size_t chunk,
                           KvDType kv_dtype = KvDType::kF32) {
  auto tokenizer = Tokenizer::from_gguf(model.file());
  EXPECT_TRUE(tokenizer) << tokenizer.status().message();
  return test::trace_request(model, *tokenizer, pool,
                             {.max_batch_tokens = chunk, .max_seqs = 1, .kv = {.dtype = kv_dtype}},
                             test::greedy_request(c.prompt_ids, c.greedy_ids.size()));
}

void check_case(const DecoderModel& model, ThreadPool& pool, const GoldenCase& c, size_t chunk) {
  const test::EngineTrace trace = run_case(model, pool, c, chunk);
  for (const auto& [pos, want] : c.logits) {
    auto it = trace.logits.find(pos);
    if (it == trace.logits.end()) continue;  // past the last computed token
    expect_logits_near(it->second, want, pos);
  }
  EXPECT_EQ(trace.tokens, c.greedy_ids) << "prompt: " << c.prompt;
}

TEST_P(GoldenTest, GreedyIdsAndLogitsMatchReference) {
  auto model = DecoderModel::load(GetParam());
  ASSERT_TRUE(model) << model.status().message();
  ThreadPool pool(2);
  for (const GoldenCase& c : load_cases()) {
    SCOPED_TRACE(c.prompt);
    check_case(**model, pool, c, 512);
  }
}

// An f16 KV cache keeps every reference greedy id (200 per prompt); its logits move by up to ~0.05 (see
// paged_kv_test.cpp), so only the ids are compared. bf16 keeps 8 mantissa bits instead of 11 and does not:
// measured, it kept the first prompt's 200 ids, flipped the second's first id (a near-tie) and the
// third's after 136; its quality is bounded by the perplexity and logit tests instead.
TEST_P(GoldenTest, F16KvKeepsTheGreedyIds) {
  auto model = DecoderModel::load(GetParam());
  ASSERT_TRUE(model) << model.status().message();
  ThreadPool pool(2);
  for (const GoldenCase& c : load_cases()) {
    EXPECT_EQ(run_case(**model, pool, c, 512, KvDType::kF16).tokens, c.greedy_ids) << "prompt: " << c.prompt;
  }
}

// int8 K/V (keys per channel) follows the reference greedy ids until a near-tie: each prompt's ids agree
// to the end, or the first that differs is one where the f32 model's two best logits lie within
// kInt8TieMargin (a perturbation the size of int8 K/V's flips it; bf16 flips the same kind, see above).
// Measured: 200, 27 and 200 of the 200 ids agree, the one flip at an f32 margin of 0.0072 (keys per
// channel wait in a 16-bit tail until their group is complete).
constexpr float kInt8TieMargin = 0.1f;

TEST_P(GoldenTest, Int8KvKeepsTheGreedyIdsUpToANearTie) {
  auto model = DecoderModel::load(GetParam());
  ASSERT_TRUE(model) << model.status().message();
  ThreadPool pool(2);
  size_t total = 0;
  for (const GoldenCase& c : load_cases()) {
    const std::vector<TokenId> tokens = run_case(**model, pool, c, 512, KvDType::kInt8).tokens;
    size_t agree = 0;
    while (agree < tokens.size() && agree < c.greedy_ids.size() && tokens[agree] == c.greedy_ids[agree]) ++agree;
    total += agree;
    if (agree == c.greedy_ids.size()) continue;
    // The f32 logits that chose the id int8 changed: after the prompt and the `agree` ids before it.
    const test::EngineTrace f32 = run_case(**model, pool, c, 512);
    std::vector<float> row = f32.logits.at(c.prompt_ids.size() - 1 + agree);
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    std::printf("int8 K/V: %zu of %zu greedy ids as the f32 reference; the f32 margin at the first flip: %.4f\n", agree,
                c.greedy_ids.size(), row[0] - row[1]);
    EXPECT_LT(row[0] - row[1], kInt8TieMargin) << "prompt: " << c.prompt << ", id " << agree;
  }
  EXPECT_GE(total, 300u) << "of the 600 ids of the three prompts";
}

TEST_P(GoldenTest, ChunkedPrefillGivesTheSameResult) {
  auto model = DecoderModel::load(GetParam());
  ASSERT_TRUE(model) << model.status().message();
  ThreadPool pool(1);
  for (const GoldenCase& c : load_cases()) check_case(**model, pool, c, 7);
}

TEST_P(GoldenTest, TokenizerReproducesPromptIds) {
  auto model = DecoderModel::load(GetParam());
  ASSERT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  for (const GoldenCase& c : load_cases()) EXPECT_EQ(tokenizer->encode(c.prompt, true), c.prompt_ids) << c.prompt;
}

// kvserve run's path: generate() on the engine, with the cache and with the recompute-everything baseline.
TEST_P(GoldenTest, GreedyWithAndWithoutCacheMatchesReference) {
  auto model = DecoderModel::load(GetParam());
  ASSERT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  ThreadPool pool(2);
  const GoldenCase c = load_cases().at(0);
  for (bool cache : {true, false}) {
    auto engine = Engine::create(**model, *tokenizer, pool, {.max_seqs = 1});
    ASSERT_TRUE(engine) << engine.status().message();
    RequestParams params = test::greedy_request(c.prompt_ids, 60, /*all_logits=*/false);
    params.recompute_history = !cache;
    std::string streamed;
    auto result = generate(**engine, std::move(params), [&](std::string_view s) { streamed += s; });
    ASSERT_TRUE(result) << result.status().message();
    EXPECT_EQ(result->tokens, std::vector<TokenId>(c.greedy_ids.begin(), c.greedy_ids.begin() + 60))
        << "cache " << cache;
    EXPECT_EQ(streamed, result->text);
    // The streamed continuation is exactly what decoding prompt + continuation adds to the prompt.
    std::vector<TokenId> all = c.prompt_ids;
    all.insert(all.end(), result->tokens.begin(), result->tokens.end());
    EXPECT_EQ(tokenizer->decode(c.prompt_ids) + result->text, tokenizer->decode(all));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values(test::default_model_path(), test::other_tool_model_path()),
                         [](const auto& info) { return info.index == 0 ? "OurConversion" : "LlamaCppFile"; });

}  // namespace
}  // namespace kvs
