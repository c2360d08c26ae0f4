// The continuous-batching engine on the default model: batching, chunked prefill and preemption
// must not change any request's greedy output, and every block goes back to the pool.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>

#include "default_model.h"

namespace kvs {
namespace {

using Fixture = test::DefaultModel;

const std::vector<std::string> kPrompts = {
    "Once upon a time",
    "Lily and Ben went to the park.",
    "The cat",
    "One day, a little bird",
    "Tom had a red ball. He",
    "Sue liked to",
    "The sun was hot and",
    "A big dog ran",
};

RequestParams greedy(const Tokenizer& tokenizer, const std::string& prompt, size_t max_tokens) {
  RequestParams p;
  p.prompt = tokenizer.encode(prompt, true);
  p.max_new_tokens = max_tokens;
  p.sampling.temperature = 0.0f;
  p.stop_at_eos = false;
  return p;
}

struct Collected {
  std::vector<TokenId> tokens;
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::kLength;
};

// Runs all requests in one engine until done; returns each request's tokens and text.
std::vector<Collected> run_all(Fixture& f, const EngineConfig& config, const std::vector<RequestParams>& requests,
                               size_t* preemptions = nullptr) {
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, config);
  EXPECT_TRUE(engine) << engine.status().message();
  std::vector<Collected> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = (*engine)->add_request(requests[i], [&out, i](const RequestOutput& o) {
      out[i].tokens.insert(out[i].tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      out[i].text += o.text;
      if (o.finished) {
        out[i].finished = true;
        out[i].reason = o.finish_reason;
      }
    });
    EXPECT_TRUE(id) << id.status().message();
  }
  for (int steps = 0; (*engine)->has_work(); ++steps) {
    (*engine)->step();
    EXPECT_TRUE((*engine)->kv().check_invariants().is_ok()) << (*engine)->kv().check_invariants().message();
    EXPECT_LT(steps, 100000) << "engine does not make progress";
    if (steps >= 100000) break;
  }
  EXPECT_EQ((*engine)->metrics().kv_blocks_used, 0u);  // every block back in the pool
  if (preemptions) *preemptions = (*engine)->metrics().preemptions_total;
  return out;
}

TEST(Engine, BatchedGreedyEqualsAlone) {
  Fixture f;
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < 32; ++i)
    requests.push_back(greedy(*f.tokenizer, kPrompts[i % kPrompts.size()], 20 + i % 7 * 5));
  std::vector<Collected> alone;
  for (const auto& r : requests) alone.push_back(run_all(f, {}, {r})[0]);
  const auto together = run_all(f, {.max_batch_tokens = 256, .max_seqs = 32}, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(together[i].finished);
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
    EXPECT_EQ(together[i].tokens.size(), requests[i].max_new_tokens);
  }
}

// Every K/V element type: a row's stored bits do not depend on the batch (per-token quantization rows
// on their own), so neither does any output.
TEST(Engine, BatchedGreedyEqualsAloneWithEveryKvType) {
  Fixture f;
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < 12; ++i) requests.push_back(greedy(*f.tokenizer, kPrompts[i % kPrompts.size()], 24 + i * 3));
  for (KvDTypes type : {KvDTypes(KvDType::kF16), KvDTypes(KvDType::kBF16), KvDTypes(KvDType::kInt8),
                        KvDTypes(KvDType::kInt4), KvDTypes(KvDType::kInt8, KvDType::kInt4)}) {
    std::vector<Collected> alone;
    for (const auto& r : requests) alone.push_back(run_all(f, {.kv = {.dtype = type}}, {r})[0]);
    const auto together = run_all(f, {.max_batch_tokens = 128, .max_seqs = 12, .kv = {.dtype = type}}, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << kv_dtypes_name(type) << " request " << i;
      EXPECT_EQ(together[i].tokens.size(), requests[i].max_new_tokens);
    }
  }
}

TEST(Engine, ChunkedPrefillEqualsOnePass) {
  Fixture f;
  // (Built with append: GCC 12 at -O3 takes string(300, 'a') + "..." for an out-of-bounds copy.)
  const std::string long_prompt = std::string(300, 'a').append(" Once upon a time");
  const std::vector<RequestParams> requests = {greedy(*f.tokenizer, long_prompt, 30),
                                               greedy(*f.tokenizer, "Once upon a time", 30)};
  const auto big = run_all(f, {.max_batch_tokens = 1024}, requests);
  const auto small = run_all(f, {.max_batch_tokens = 7}, requests);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(small[i].tokens, big[i].tokens) << i;
}

TEST(Engine, PreemptionAndResumptionGiveTheSameOutputs) {
  Fixture f;
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < 8; ++i) requests.push_back(greedy(*f.tokenizer, kPrompts[i], 80));
  const auto roomy = run_all(f, {}, requests);
  size_t preemptions = 0;
  // 12 blocks of 16 tokens: two or three requests at a time at most, so growth forces preemption.
  const auto tight = run_all(f, {.max_batch_tokens = 64, .max_seqs = 8, .kv = {.blocks = 12}}, requests, &preemptions);
  EXPECT_GT(preemptions, 0u);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(tight[i].finished);
    EXPECT_EQ(tight[i].tokens, roomy[i].tokens) << "request " << i;
  }
}

// The same under quantized K/V with rows quantized on their own (keys per token): a resumed request
// recomputes its tokens in chunks and stores the very bits it stored one token at a time. (Keys per
// channel requantize a filling group as it widens, so a chunk sees its group's final range: close,
// not bit for bit.)
TEST(Engine, PreemptionAndResumptionGiveTheSameOutputsWithQuantizedKv) {
  Fixture f;
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < 8; ++i) requests.push_back(greedy(*f.tokenizer, kPrompts[i], 80));
  for (KvDTypes type : {KvDTypes(KvDType::kInt8), KvDTypes(KvDType::kInt4)}) {
    const EngineConfig roomy_config{.kv = {.dtype = type, .key_scales = KvScaleAxis::kPerToken}};
    const auto roomy = run_all(f, roomy_config, requests);
    EngineConfig tight_config = roomy_config;
    tight_config.max_batch_tokens = 64;
    tight_config.max_seqs = 8;
    tight_config.kv.blocks = 12;
    size_t preemptions = 0;
    const auto tight = run_all(f, tight_config, requests, &preemptions);
    EXPECT_GT(preemptions, 0u);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(tight[i].tokens, roomy[i].tokens) << kv_dtypes_name(type) << " request " << i;
  }
}

TEST(Engine, RequestThatCanNeverFitIsRejectedWithNumbers) {
  Fixture f;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.block_size = 16, .blocks = 2}});
  ASSERT_TRUE(engine);
  auto r = (*engine)->add_request(greedy(*f.tokenizer, std::string(200, 'x'), 5), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(r.status().message().find("the whole pool has 2"), std::string::npos) << r.status().message();
  RequestParams too_long = greedy(*f.tokenizer, "x", 5);
  too_long.prompt.assign(600, 300);
  auto r2 = (*engine)->add_request(too_long, {});
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.status().message().find("600 tokens"), std::string::npos) << r2.status().message();
}

TEST(Engine, RequestOutgrowingThePoolAloneEndsCleanly) {
  Fixture f;
  const auto out = run_all(f, {.kv = {.block_size = 16, .blocks = 2}}, {greedy(*f.tokenizer, "Once upon a time", 100)});
  EXPECT_TRUE(out[0].finished);
  EXPECT_EQ(out[0].reason, FinishReason::kKvCacheFull);
  EXPECT_EQ(out[0].tokens.size(), 32u - 5u + 1u);  // 32 slots: 5 prompt + 27 computed + the last sampled
}

TEST(Engine, AbortFreesBlocksAtOnce) {
  Fixture f;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {});
  ASSERT_TRUE(engine);
  bool aborted = false;
  auto id = (*engine)->add_request(greedy(*f.tokenizer, "Once upon a time", 200), [&](const RequestOutput& o) {
    if (o.finished && o.finish_reason == FinishReason::kAborted) aborted = true;
  });
  ASSERT_TRUE(id);
  for (int i = 0; i < 5; ++i) (*engine)->step();
  EXPECT_GT((*engine)->metrics().kv_blocks_used, 0u);
  (*engine)->abort(*id);
  EXPECT_TRUE(aborted);
  EXPECT_EQ((*engine)->metrics().kv_blocks_used, 0u);
  EXPECT_FALSE((*engine)->has_work());
  EXPECT_EQ((*engine)->metrics().requests_aborted_total, 1u);
}

TEST(Engine, StopStringsAndMetrics) {
  Fixture f;
  RequestParams p = greedy(*f.tokenizer, "Once upon a time", 100);
  p.stop_strings = {"Lily"};
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {});
  ASSERT_TRUE(engine);
  Collected c;
  ASSERT_TRUE((*engine)->add_request(p, [&](const RequestOutput& o) {
    c.text += o.text;
    if (o.finished) c.reason = o.finish_reason;
  }));
  while ((*engine)->has_work()) (*engine)->step();
  EXPECT_EQ(c.text, ", there was a little girl named ");
  EXPECT_EQ(c.reason, FinishReason::kStopString);
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.prompt_tokens_total, 5u);
  EXPECT_EQ(m.time_to_first_token_seconds.count, 1u);
  EXPECT_GT(m.inter_token_latency_seconds.count, 0u);
  const std::string prom = to_prometheus(m);
  EXPECT_NE(prom.find("kvserve_prompt_tokens_total 5"), std::string::npos) << prom;
  EXPECT_NE(prom.find("kvserve_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1"), std::string::npos);
}

// The engine reads time from the clock its config gives: a request that waits 1.5 s before its first step has a time
// to first token of exactly 1.5 s, and steps 0.25 s apart make its inter-token latencies exactly 0.25 s.
TEST(Engine, TimeComesFromTheInjectedClock) {
  Fixture f;
  ManualClock clock;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.clock = &clock});
  ASSERT_TRUE(engine) << engine.status().message();
  ASSERT_TRUE((*engine)->add_request(greedy(*f.tokenizer, "Once upon a time", 5), {}));
  clock.advance(std::chrono::milliseconds(1500));
  while ((*engine)->step()) clock.advance(std::chrono::milliseconds(250));
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.time_to_first_token_seconds.sum, 1.5);
  EXPECT_EQ(m.inter_token_latency_seconds.sum, 4 * 0.25);
  uint64_t latencies = 0;
  for (uint64_t c : m.inter_token_latency_seconds.counts) latencies += c;
  EXPECT_EQ(latencies, 4u);
}

}  // namespace
}  // namespace kvs
