// Parallel sampling (num_samples > 1) through the engine on the default model: each sample equals a
// separate request with its seed (seed + i), token for token and in its cumulative log-probability,
// under block sizes 1, 16 and 256, with half-precision K/V, and when samples are preempted and resumed;
// the KV memory is one prompt plus a tail per sample (the peak, exactly); abort ends every sample,
// forked or not yet; forks hold seats under max_seqs; bad combinations are refused.
//
// Bound: the samples read the prompt's K/V bits (shared, or copied bit for bit on write) and each
// kernel's result for a row does not depend on its batch (tests/tensor), so the logits, hence the
// draws and the log-probabilities summed in the same order, are expected equal (EXPECT_DOUBLE_EQ).
#include <gtest/gtest.h>

#include <random>

#include "default_model.h"
#include "engine/engine.h"

namespace kvs {
namespace {

struct SampleRun {
  std::vector<TokenId> tokens;
  double logprob = 0.0;
  size_t finals = 0;  // final outputs seen (exactly one expected)
  FinishReason reason = FinishReason::kLength;
};

struct Fixture : test::DefaultModel {
  std::unique_ptr<Engine> engine(const EngineConfig& config) {
    auto e = Engine::create(*model, *tokenizer, pool, config);
    EXPECT_TRUE(e) << e.status().message();
    return e ? std::move(e).value() : nullptr;
  }
};

RequestParams sampled(std::vector<TokenId> prompt, size_t new_tokens, uint64_t seed, size_t samples) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_new_tokens = new_tokens;
  p.sampling = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed};
  p.stop_at_eos = false;
  p.num_samples = samples;
  p.track_logprob = true;
  return p;
}

// Queues every request, steps the engine until it is idle (invariants checked after each step) and
// returns each request's outputs by sample.
std::vector<std::vector<SampleRun>> run_all(Engine& engine, std::vector<RequestParams> requests,
                                            size_t max_running = SIZE_MAX) {
  std::vector<std::vector<SampleRun>> runs(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    runs[i].resize(requests[i].num_samples);
    auto id = engine.add_request(std::move(requests[i]), [&runs, i](const RequestOutput& out) {
      EXPECT_LT(out.sample, runs[i].size());
      if (out.sample >= runs[i].size()) return;
      SampleRun& run = runs[i][out.sample];
      run.tokens.insert(run.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      run.logprob = out.cumulative_logprob;
      if (out.finished) {
        ++run.finals;
        run.reason = out.finish_reason;
      }
    });
    EXPECT_TRUE(id) << id.status().message();
  }
  while (engine.step()) {
    const Status s = engine.kv().check_invariants();
    EXPECT_TRUE(s.is_ok()) << s.message();
    EXPECT_LE(engine.metrics().requests_running, max_running);
  }
  return runs;
}

// Sample i of `request` as a request of its own: one sample, seed + i.
std::vector<RequestParams> separate_requests(const RequestParams& request) {
  std::vector<RequestParams> separate;
  for (size_t i = 0; i < request.num_samples; ++i) {
    RequestParams p = request;
    p.num_samples = 1;
    p.sampling.seed += i;
    separate.push_back(std::move(p));
  }
  return separate;
}

// The samples of one request against separate requests with seeds seed + i on an engine of the same
// config without a prefix cache.
void expect_samples_equal_separate_requests(Fixture& f, EngineConfig config, const RequestParams& request) {
  const auto together = run_all(*f.engine(config), {request});
  config.kv.prefix_caching = false;
  const std::vector<RequestParams> separate = separate_requests(request);
  const auto alone = run_all(*f.engine(config), separate);
  ASSERT_EQ(together[0].size(), request.num_samples);
  for (size_t i = 0; i < request.num_samples; ++i) {
    const SampleRun& a = together[0][i];
    const SampleRun& b = alone[i][0];
    EXPECT_EQ(a.finals, 1u) << "sample " << i;
    EXPECT_EQ(a.tokens.size(), request.max_new_tokens) << "sample " << i;
    EXPECT_EQ(a.tokens, b.tokens) << "sample " << i;
    EXPECT_DOUBLE_EQ(a.logprob, b.logprob) << "sample " << i;
    EXPECT_LT(a.logprob, 0.0);
  }
  bool any_differ = false;
  for (size_t i = 1; i < request.num_samples; ++i) any_differ |= together[0][i].tokens != together[0][0].tokens;
  EXPECT_TRUE(any_differ) << "the samples' seeds differ, so should their draws";
}

TEST(ParallelSampling, SamplesEqualSeparateRequestsWithTheirSeedsUnderEveryBlockSize) {
  Fixture f;
  for (size_t block_size : {1u, 16u, 256u}) {
    SCOPED_TRACE(block_size);
    expect_samples_equal_separate_requests(f, {.kv = {.block_size = block_size}},
                                           sampled(f.random_tokens(21, block_size), 24, 1234, 4));
  }
}

TEST(ParallelSampling, SamplesEqualSeparateRequestsWithHalfPrecisionKv) {
  Fixture f;
  expect_samples_equal_separate_requests(f, {.kv = {.block_size = 16, .dtype = KvDType::kF16}},
                                         sampled(f.random_tokens(40, 5), 20, 99, 3));
}

// A pool far too small for every sample's tail: samples are preempted, resume from the prefix cache
// (their own generated tokens included) and still draw what separate requests draw.
TEST(ParallelSampling, PreemptedSamplesResumeWithTheSameOutput) {
  Fixture f;
  const EngineConfig config{.max_batch_tokens = 64, .kv = {.block_size = 16, .blocks = 12}};
  const RequestParams request = sampled(f.random_tokens(40, 8), 60, 7, 4);
  auto engine = f.engine(config);
  const auto together = run_all(*engine, {request});
  EXPECT_GT(engine->metrics().preemptions_total, 0u) << "the pool should force preemptions";
  const std::vector<RequestParams> separate = separate_requests(request);
  const auto alone = run_all(*f.engine({.kv = {.block_size = 16, .prefix_caching = false}}), separate);
  for (size_t i = 0; i < request.num_samples; ++i) {
    EXPECT_EQ(together[0][i].finals, 1u);
    EXPECT_EQ(together[0][i].tokens, alone[i][0].tokens) << "sample " << i;
    EXPECT_DOUBLE_EQ(together[0][i].logprob, alone[i][0].logprob) << "sample " << i;
  }
}

// n samples of P prompt tokens, T new tokens each (the last never computed): the full prompt blocks
// once, and per sample the prompt's partial block and its own tokens; n - 1 copies of that block.
TEST(ParallelSampling, MemoryIsOnePromptPlusATailPerSample) {
  Fixture f;
  const size_t P = 100, T = 20, n = 8, bs = 16;
  auto engine = f.engine({.kv = {.block_size = bs}});
  const auto runs = run_all(*engine, {sampled(f.random_tokens(P, 3), T, 11, n)});
  for (const SampleRun& r : runs[0]) EXPECT_EQ(r.tokens.size(), T);
  const size_t tail_blocks = kv_blocks_for_tokens(P % bs + T - 1, bs);
  EXPECT_EQ(engine->kv().usage().blocks_used_peak, P / bs + n * tail_blocks);
  EXPECT_EQ(engine->kv().num_copy_on_write(), n - 1);
  EXPECT_EQ(engine->kv().usage().blocks_used, 0u);
  const EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.requests_finished_total, 1u) << "one request, however many samples";
  EXPECT_EQ(m.prompt_tokens_total, P);
  EXPECT_EQ(m.generation_tokens_total, n * T);
  EXPECT_EQ(m.time_to_first_token_seconds.count, 1u);

  // The same samples as separate requests hold the prompt once per request (the prefix cache shares
  // none of it: they are admitted in one step, before any block is committed).
  auto separate = f.engine({.max_batch_tokens = n * P, .kv = {.block_size = bs}});
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < n; ++i) requests.push_back(sampled(f.random_tokens(P, 3), T, 11 + i, 1));
  run_all(*separate, requests);
  EXPECT_EQ(separate->kv().usage().blocks_used_peak, n * kv_blocks_for_tokens(P + T - 1, bs));
}

TEST(ParallelSampling, AbortEndsEverySampleForkedOrNot) {
  Fixture f;
  for (size_t steps_before_abort : {1u, 8u}) {  // mid-prompt (nothing forked yet), then mid-decode
    SCOPED_TRACE(steps_before_abort);
    auto engine = f.engine({.max_batch_tokens = 64, .kv = {.block_size = 16}});
    std::vector<SampleRun> runs(3);
    auto id = engine->add_request(sampled(f.random_tokens(200, 1), 50, 3, 3), [&](const RequestOutput& out) {
      ASSERT_LT(out.sample, runs.size());
      runs[out.sample].tokens.insert(runs[out.sample].tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) {
        ++runs[out.sample].finals;
        runs[out.sample].reason = out.finish_reason;
      }
    });
    ASSERT_TRUE(id);
    for (size_t i = 0; i < steps_before_abort; ++i) engine->step();
    engine->abort(*id);
    for (const SampleRun& r : runs) {
      EXPECT_EQ(r.finals, 1u);
      EXPECT_EQ(r.reason, FinishReason::kAborted);
    }
    EXPECT_FALSE(engine->has_work());
    EXPECT_EQ(engine->kv().usage().blocks_used, 0u);
    EXPECT_EQ(engine->metrics().requests_aborted_total, 1u);
    const Status s = engine->kv().check_invariants();
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
}

// max_seqs 4: a request of 3 samples holds 3 seats, so a second one waits until the first is done.
TEST(ParallelSampling, ForksHoldSeatsUnderMaxSeqs) {
  Fixture f;
  auto engine = f.engine({.max_seqs = 4, .kv = {.block_size = 16}});
  const auto runs =
      run_all(*engine, {sampled(f.random_tokens(10, 1), 8, 1, 3), sampled(f.random_tokens(10, 2), 8, 2, 3)},
              /*max_running=*/4);
  for (const auto& request : runs)
    for (const SampleRun& r : request) EXPECT_EQ(r.tokens.size(), 8u);
}

TEST(ParallelSampling, BadCombinationsAreRefused) {
  Fixture f;
  auto engine = f.engine({});
  RequestParams none = sampled({1, 2, 3}, 4, 0, 0);
  EXPECT_EQ(engine->add_request(none, {}).status().code(), ErrorCode::kInvalidArgument);
  RequestParams prompt_only = sampled({1, 2, 3}, 0, 0, 2);
  EXPECT_EQ(engine->add_request(prompt_only, {}).status().code(), ErrorCode::kInvalidArgument);
  RequestParams with_logits = sampled({1, 2, 3}, 4, 0, 2);
  with_logits.all_logits = true;
  const auto refused = engine->add_request(with_logits, {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("2 samples"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace kvs
