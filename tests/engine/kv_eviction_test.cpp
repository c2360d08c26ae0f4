// KV eviction policies through the engine (kv/policies/, attention/compact_kv, engine/kv_evictor): each
// policy equals the naive reference that evicts the same tokens (tests/model/naive_llama_forward.h: keys
// kept before RoPE and rotated on read at their index in the cache, where the engine re-rotates them when
// they move); memory never exceeds the budget over a 10,000-token generation, far past the context; batched
// equals alone with mixed policies; and policies compose with quantized K/V, preemption and the prefix cache.
//
// Bounds. Against the naive fp32 reference (one token at a time, sums in another order) logits agree within
// the 1e-4 of kv_cache_equivalence_test: a re-rotated key differs from one rotated at its new position only
// by the rounding of one fp32 rotation per move (positions stay below the budget, so the angles are small).
// Heavy hitters rank fixed-point sums of fp32 probabilities against the reference's double sums of its own
// probabilities: where the two rankings differ, the scores on both sides of the cut must tie within 1e-3
// (relative; the probabilities agree to ~1e-6 and a score sums at most a few hundred), and the reference
// then takes the engine's set. Batched and alone read the same K/V bits in the same order and add the same
// fixed-point masses, so they are bitwise equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "default_model.h"
#include "engine_trace.h"
#include "eval/stream_perplexity.h"
#include "model/synth.h"
#include "naive_compare.h"
#include "test_support.h"

namespace kvs {
namespace {

using testing::NaiveEviction;
using testing::NaiveLlama;

std::vector<TokenId> prompt_of(size_t n, size_t salt = 0) {
  std::vector<TokenId> p{1};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<TokenId>(3 + (i * 37 + salt * 11) % 500));
  return p;
}

KvPolicyParams policy(KvPolicyKind kind, size_t budget, size_t sinks = KvPolicyParams::kDefault,
                      size_t recent = KvPolicyParams::kDefault, KvScoreScope scores = KvScoreScope::kPerHead) {
  return {.kind = kind, .budget = budget, .sinks = sinks, .recent = recent, .scores = scores};
}

KvPolicyParams per_query_h2o() {
  KvPolicyParams p = policy(KvPolicyKind::kHeavyHitters, 32, 1, 8);
  p.per_query_scores = true;
  return p;
}

NaiveEviction naive_rule(const KvPolicyParams& resolved) {
  using K = NaiveEviction::Kind;
  const K kind = resolved.kind == KvPolicyKind::kWindow  ? K::kWindow
                 : resolved.kind == KvPolicyKind::kSinks ? K::kSinks
                                                         : K::kHeavyHitters;
  return {.kind = kind,
          .budget = resolved.budget,
          .keep = resolved.keep(),
          .sinks = resolved.sinks,
          .recent = resolved.recent,
          .pooled = resolved.scores == KvScoreScope::kPooled,
          .per_query = resolved.per_query_scores};
}

struct Recorded {
  std::vector<std::vector<std::vector<uint32_t>>> evictions;  // [eviction][row] kept slots
  std::vector<size_t> computed;                               // [eviction] tokens computed before it
};

class KvEviction : public ::testing::Test {
 protected:
  test::TempDir dir_{std::string("evict_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  ThreadPool pool_{2};

  std::string synth(const std::string& preset) {
    const std::string path = dir_.file(preset + ".gguf");
    EXPECT_TRUE(write_synth_model(*synth_preset(preset), path));
    return path;
  }
};

// The naive reference, fed the engine's tokens, must keep the same entries at every eviction and compute the
// same logits. Returns the ties it adopted.
size_t expect_matches_naive(const gguf::File& file, const test::EngineTrace& trace, const Recorded& recorded,
                            const std::vector<TokenId>& prompt, const KvPolicyParams& resolved,
                            const std::string& what) {
  NaiveLlama reference(file, 0, naive_rule(resolved));
  size_t eviction = 0, ties = 0;
  reference.on_evict = [&](NaiveLlama::KeptSets& kept) {
    ASSERT_LT(eviction, recorded.evictions.size()) << what << ": the reference evicts more often";
    const size_t computed = recorded.computed[eviction];
    const auto& engine = recorded.evictions[eviction++];
    ASSERT_EQ(engine.size(), kept.size()) << what;
    for (size_t r = 0; r < kept.size(); ++r) {
      const std::vector<size_t> got(engine[r].begin(), engine[r].end());
      if (got == kept[r]) continue;
      // Both sides of the cut must tie: every entry one kept and the other did not. Pooled: the summed scores.
      std::vector<double> mass = reference.masses(r, computed);
      if (kept.size() == 1) {
        for (size_t row = 1; row < reference.num_rows(); ++row)
          for (size_t i = 0; i < mass.size(); ++i) mass[i] += reference.masses(row, computed)[i];
      }
      std::vector<size_t> only_naive, only_engine;
      std::ranges::set_difference(kept[r], got, std::back_inserter(only_naive));
      std::ranges::set_difference(got, kept[r], std::back_inserter(only_engine));
      for (size_t a : only_naive)
        for (size_t b : only_engine) {
          const double ma = mass[a], mb = mass[b];
          EXPECT_NEAR(ma, mb, 1e-3 * (1.0 + std::max(ma, mb)))
              << what << ": eviction " << eviction << " row " << r << " keeps entry " << b << " for " << a;
        }
      kept[r] = got;
      ++ties;
    }
  };
  const float worst = test::worst_against_naive(reference, prompt, trace, what);
  EXPECT_EQ(eviction, recorded.evictions.size()) << what << ": the engine evicted more often";
  EXPECT_LE(worst, 1e-4f) << what;
  return ties;
}

test::EngineTrace trace_with_policy(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                    const EngineConfig& config, RequestParams params, Recorded& recorded) {
  params.on_eviction = [&](const KvEvictionEvent& e) {
    recorded.evictions.emplace_back(e.kept.begin(), e.kept.end());
    recorded.computed.push_back(e.num_tokens);
  };
  return test::trace_request(model, tokenizer, pool, config, std::move(params));
}

// Every policy, prompts longer and shorter than the budget, chunks of 5 in blocks of 4 and of 512 in blocks of 8
// (evictions of a block): the naive reference evicts the same entries and computes the same logits.
TEST_F(KvEviction, EachPolicyEqualsTheNaiveReferenceThatEvictsTheSameTokens) {
  const std::string path = synth("tiny-gqa");
  const test::LoadedModel m = test::load_model(path);
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file);
  const std::vector<KvPolicyParams> policies = {policy(KvPolicyKind::kWindow, 24), policy(KvPolicyKind::kSinks, 24),
                                                policy(KvPolicyKind::kHeavyHitters, 32, 0, 8),
                                                policy(KvPolicyKind::kHeavyHitters, 32, 2, 8, KvScoreScope::kPooled),
                                                per_query_h2o()};
  size_t ties = 0, decisions = 0;
  for (const KvPolicyParams& p : policies) {
    for (const auto& [block, chunk] : {std::pair<size_t, size_t>{4, 5}, {8, 512}}) {
      {
        for (size_t prompt_tokens : {10, 45}) {
          const EngineConfig config{.max_batch_tokens = chunk, .max_seqs = 1, .kv = {.block_size = block, .policy = p}};
          const KvPolicyParams resolved = p.resolved(block);
          const std::string what =
              fmt::format("{} block {} chunk {} prompt {}", resolved.describe(), block, chunk, prompt_tokens);
          Recorded recorded;
          const std::vector<TokenId> prompt = prompt_of(prompt_tokens);
          const auto trace =
              trace_with_policy(*m.model, *m.tokenizer, pool_, config, test::greedy_request(prompt, 60), recorded);
          ASSERT_EQ(trace.tokens.size(), 60u) << what;
          EXPECT_GE(recorded.evictions.size(), 5u) << what;
          EXPECT_LE(trace.result.kv_blocks_held, kv_blocks_for_tokens(resolved.budget, block)) << what;
          ties += expect_matches_naive(*file, trace, recorded, prompt, resolved, what);
          for (const auto& e : recorded.evictions) decisions += e.size();
        }
      }
    }
  }
  RecordProperty("ties", static_cast<int>(ties));
  RecordProperty("decisions", static_cast<int>(decisions));
  EXPECT_LE(ties * 50, decisions) << "rankings may differ only on rare ties";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << message << "' does not say '" << part << "'";
}

// Requests run together on one engine; after each step the KV invariants hold and every running sequence
// under a policy holds at most its budget of slots (`budgets`: 0 for none).
std::vector<test::EngineTrace> run_together(Engine& engine, std::vector<RequestParams> requests) {
  std::vector<test::EngineTrace> traces(requests.size());
  std::vector<SeqId> ids;
  std::vector<size_t> budgets;
  for (size_t r = 0; r < requests.size(); ++r) {
    budgets.push_back(requests[r].kv_policy ? requests[r].kv_policy->budget : 0);
    requests[r].on_logits = [&traces, r](size_t position, std::span<const float> logits) {
      traces[r].logits[position].assign(logits.begin(), logits.end());
    };
    auto id = engine.add_request(std::move(requests[r]), [&traces, r](const RequestOutput& out) {
      traces[r].tokens.insert(traces[r].tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) traces[r].result.kv_blocks_held = out.kv_blocks_held;
    });
    EXPECT_TRUE(id) << id.status().message();
    ids.push_back(id ? *id : SeqId{0});
  }
  while (engine.step()) {
    const Status s = engine.kv().check_invariants();
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s.is_ok()) break;
    for (size_t r = 0; r < ids.size(); ++r) {
      if (budgets[r] > 0) {
        EXPECT_LE(engine.kv().num_slots(ids[r]), budgets[r]) << "request " << r;
      }
    }
  }
  return traces;
}

RequestParams with_policy(RequestParams p, const KvPolicyParams& policy) {
  p.kv_policy = policy;
  return p;
}

void expect_bitwise_equal(const test::EngineTrace& a, const test::EngineTrace& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (const auto& [position, row] : a.logits)
    ASSERT_EQ(row, b.logits.at(position)) << what << " position " << position;
}

// Four requests in one batch, each with its own policy (full, window, sinks, heavy hitters), prefill chunks
// interleaved: each equals its run alone bit for bit, in f32 and in int8 K/V (keys grouped per token).
TEST_F(KvEviction, BatchedEqualsAloneWithMixedPolicies) {
  const test::LoadedModel m = test::load_model(synth("tiny-gqa"));
  const std::vector<std::optional<KvPolicyParams>> policies = {std::nullopt, policy(KvPolicyKind::kWindow, 24),
                                                               policy(KvPolicyKind::kSinks, 24),
                                                               policy(KvPolicyKind::kHeavyHitters, 32, 1, 8)};
  for (KvDType dtype : {KvDType::kF32, KvDType::kInt8}) {
    const EngineConfig config{
        .max_batch_tokens = 16,
        .max_seqs = 4,
        .kv = {.block_size = 4, .dtype = dtype, .key_scales = KvScaleAxis::kPerToken, .prefix_caching = false}};
    std::vector<RequestParams> requests;
    for (size_t r = 0; r < policies.size(); ++r) {
      RequestParams p = test::greedy_request(prompt_of(20 + 15 * r, r), 70);
      p.kv_policy = policies[r];
      requests.push_back(std::move(p));
    }
    std::vector<test::EngineTrace> alone;
    for (const RequestParams& p : requests)
      alone.push_back(test::trace_request(*m.model, *m.tokenizer, pool_, config, p));
    auto engine = Engine::create(*m.model, *m.tokenizer, pool_, config);
    ASSERT_TRUE(engine) << engine.status().message();
    const auto together = run_together(**engine, requests);
    for (size_t r = 0; r < policies.size(); ++r) {
      expect_bitwise_equal(together[r], alone[r], fmt::format("{} request {}", kv_dtype_name(dtype), r));
    }
    EXPECT_GT((*engine)->metrics().kv_evicted_tokens_total, 3 * 40u);
  }
}

// Quantized K/V under a position-based policy (no scores: the same tokens are kept whatever the element type),
// against the f32 cache under the same policy, over a 160-token prompt evaluated in chunks of 8 with the
// logits of every token (the same tokens whatever the cache). A key is rounded to its element type when
// written and once more each time it moves (at most budget / evict_unit = 4 times before it leaves the cache or
// settles among the sinks), so its error is at most 5 times that of a key rounded once: the error of the same
// prompt without eviction bounds it (measured: f16 3.1e-3 plain, 4.5e-3 evicting; int8 5.2e-2 and 6.5e-2).
TEST_F(KvEviction, QuantizedKvUnderSinksStaysWithinItsRoundingsOfF32UnderSinks) {
  const test::LoadedModel m = test::load_model(synth("tiny-gqa"));
  const KvPolicyParams sinks = policy(KvPolicyKind::kSinks, 32);
  EngineConfig config{
      .max_batch_tokens = 8, .max_seqs = 1, .kv = {.block_size = 8, .key_scales = KvScaleAxis::kPerToken}};
  const auto error_of = [&](KvDType dtype, const RequestParams& request) {
    config.kv.dtype = KvDType::kF32;
    const auto f32 = test::trace_request(*m.model, *m.tokenizer, pool_, config, request);
    config.kv.dtype = dtype;
    return test::worst_logit_difference(test::trace_request(*m.model, *m.tokenizer, pool_, config, request), f32);
  };
  const RequestParams plain = test::greedy_request(prompt_of(160), 1);
  const RequestParams evicting = with_policy(plain, sinks);
  const size_t roundings = 1 + sinks.budget / sinks.resolved(8).evict_unit;
  for (KvDType dtype : {KvDType::kF16, KvDType::kBF16, KvDType::kInt8, KvDType::kInt4}) {
    const float once = error_of(dtype, plain), moved = error_of(dtype, evicting);
    EXPECT_GT(once, 0.0f) << kv_dtype_name(dtype);
    EXPECT_GT(moved, 0.0f) << kv_dtype_name(dtype);
    EXPECT_LE(moved, float(roundings) * once) << kv_dtype_name(dtype);
  }
}

// A pool too small for three growing caches: the scheduler preempts (the last admitted first) and recomputes;
// every request still finishes with all its tokens, no cache ever exceeds its budget, and the first request,
// never preempted, equals its run alone.
TEST_F(KvEviction, ComposesWithPreemption) {
  const test::LoadedModel m = test::load_model(synth("tiny-gqa"));
  const EngineConfig config{
      .max_batch_tokens = 64, .max_seqs = 3, .kv = {.block_size = 4, .blocks = 18, .prefix_caching = false}};
  const std::vector<KvPolicyParams> policies = {policy(KvPolicyKind::kHeavyHitters, 32, 0, 8),
                                                policy(KvPolicyKind::kSinks, 32), policy(KvPolicyKind::kWindow, 32)};
  std::vector<RequestParams> requests;
  for (size_t r = 0; r < 3; ++r)
    requests.push_back(with_policy(test::greedy_request(prompt_of(10, r), 80), policies[r]));
  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, config);
  ASSERT_TRUE(engine);
  const auto together = run_together(**engine, requests);
  EXPECT_GT((*engine)->metrics().preemptions_total, 0u);
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(together[r].tokens.size(), 80u) << "request " << r;
  EXPECT_LE((*engine)->metrics().kv_blocks_used_peak, 18u);
  const EngineConfig roomy{.max_batch_tokens = 64, .max_seqs = 3, .kv = {.block_size = 4, .prefix_caching = false}};
  expect_bitwise_equal(together[0], test::trace_request(*m.model, *m.tokenizer, pool_, roomy, requests[0]),
                       "the request never preempted");
}

// A request under a policy never shares blocks: it neither takes a cached prefix nor leaves one, so a cached
// prompt it also reads is still there, unchanged, for the next request, and the policy's own output does not
// depend on what the cache holds.
TEST_F(KvEviction, AnEvictingSequenceNeverRewritesACachedPrefix) {
  const test::LoadedModel m = test::load_model(synth("tiny-gqa"));
  const EngineConfig config{.max_batch_tokens = 512, .max_seqs = 2, .kv = {.block_size = 4}};
  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, config);
  ASSERT_TRUE(engine);
  const std::vector<TokenId> prompt = prompt_of(40);
  const auto first = generate(**engine, test::greedy_request(prompt, 10, false));
  ASSERT_TRUE(first);
  RequestParams evicting = with_policy(test::greedy_request(prompt, 60, false), policy(KvPolicyKind::kSinks, 24));
  const auto evicted = generate(**engine, evicting);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(evicted->cached_tokens, 0u);
  const auto again = generate(**engine, test::greedy_request(prompt, 10, false));
  ASSERT_TRUE(again);
  EXPECT_GE(again->cached_tokens, 36u);
  EXPECT_EQ(again->tokens, first->tokens);
  EngineConfig fresh = config;
  fresh.kv.prefix_caching = false;
  EXPECT_EQ(evicted->tokens, test::trace_request(*m.model, *m.tokenizer, pool_, fresh, evicting).tokens);
  EXPECT_GT((*engine)->metrics().kv_evicted_tokens_total, 0u);
}

// What cannot run under a policy is refused with the reason and the values; a prompt longer than the context is
// accepted under one (the cache holds the budget) and refused without.
TEST_F(KvEviction, RefusesWhatCannotEvictAndAcceptsPromptsPastTheContext) {
  const test::LoadedModel m = test::load_model(synth("tiny-gqa"));
  const auto create_error = [&](EngineConfig c) {
    auto e = Engine::create(*m.model, *m.tokenizer, pool_, c);
    return e ? std::string("created") : e.status().message();
  };
  const KvPolicyParams sinks = policy(KvPolicyKind::kSinks, 64);
  expect_contains(create_error({.kv = {.dtype = KvDType::kInt8, .policy = sinks}}), "use --kv-key-scales token");
  expect_contains(create_error({.kv = {.policy = policy(KvPolicyKind::kSinks, 1024)}}),
                  "KV budget of 1024 tokens exceeds the model's context of 512");
  expect_contains(create_error({.kv = {.policy = policy(KvPolicyKind::kSinks, 20, 4)}}), "keeps no recent");
  expect_contains(create_error({.kv = {.layout = KvLayout::kContiguous, .policy = sinks}}),
                  "the contiguous KV layout and the KV policy sinks");
  expect_contains(create_error({.kv = {.policy = {.kind = KvPolicyKind::kHeavyHitters}}}), "needs a budget");
  const test::LoadedModel g = test::load_model(synth("tiny-gemma3"));
  auto gemma = Engine::create(*g.model, *g.tokenizer, pool_, {.kv = {.policy = sinks}});
  ASSERT_FALSE(gemma);
  expect_contains(gemma.status().message(), "the model's sliding-window layers do not combine");

  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, {.max_seqs = 2});
  ASSERT_TRUE(engine);
  RequestParams two = with_policy(test::greedy_request(prompt_of(10), 5, false), sinks);
  two.num_samples = 2;
  expect_contains((*engine)->add_request(two, {}).status().message(), "parallel sampling (2 samples) do not combine");
  RequestParams windowed = with_policy(test::greedy_request(prompt_of(10), 5), sinks);
  windowed.kv_window = 16;
  expect_contains((*engine)->add_request(windowed, {}).status().message(),
                  "and a KV window (16 tokens) do not combine");
  const std::vector<TokenId> long_prompt = prompt_of(1500);
  const auto refused = (*engine)->add_request(test::greedy_request(long_prompt, 5), {});
  EXPECT_EQ(refused.status().code(), ErrorCode::kOutOfRange);
  const auto accepted = generate(**engine, with_policy(test::greedy_request(long_prompt, 20, false), sinks));
  ASSERT_TRUE(accepted) << accepted.status().message();
  EXPECT_EQ(accepted->tokens.size(), 20u);
  EXPECT_LE(accepted->kv_blocks_held, 64u / 16);
  // A window on every layer bounds memory too: positions then run past the context.
  auto windowed_engine = Engine::create(*m.model, *m.tokenizer, pool_, {.max_seqs = 1, .kv = {.window = 64}});
  ASSERT_TRUE(windowed_engine);
  const auto past = generate(**windowed_engine, test::greedy_request(long_prompt, 20, false));
  ASSERT_TRUE(past) << past.status().message();
  EXPECT_EQ(past->tokens.size(), 20u);
  EXPECT_LE(past->kv_blocks_held, kv_blocks_for_tokens(64, 16) + 1);
}

// A model of context 512 generates 10,000 tokens, 20 times its context, under sinks and heavy hitters at once:
// after every step each holds at most its budget of 64 slots, so at most 4 blocks of 16, and the pool never
// holds more than the two budgets. (The 2-layer tiny-gqa: 10,000 steps under the sanitizers too.)
TEST_F(KvEviction, MemoryNeverExceedsTheBudgetOver10000Tokens) {
  const test::LoadedModel m = test::load_model(synth("tiny-gqa"));
  const EngineConfig config{.max_batch_tokens = 64, .max_seqs = 2, .kv = {.block_size = 16, .prefix_caching = false}};
  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, config);
  ASSERT_TRUE(engine);
  std::vector<SeqId> ids;
  std::vector<size_t> generated(2, 0);
  for (size_t r = 0; r < 2; ++r) {
    RequestParams p = test::greedy_request(prompt_of(5), 10000, false);
    p.sampling.temperature = 0.8f;
    p.sampling.seed = r;
    p.kv_policy = r == 0 ? policy(KvPolicyKind::kSinks, 64) : policy(KvPolicyKind::kHeavyHitters, 64);
    auto id = (*engine)->add_request(
        std::move(p), [&generated, r](const RequestOutput& out) { generated[r] += out.new_tokens.size(); });
    ASSERT_TRUE(id);
    ids.push_back(*id);
  }
  size_t steps = 0;
  while ((*engine)->step()) {
    ++steps;
    for (size_t r = 0; r < 2; ++r) {
      ASSERT_LE((*engine)->kv().num_slots(ids[r]), 64u) << "step " << steps;
      ASSERT_LE((*engine)->kv().num_blocks_held(ids[r]), 4u) << "step " << steps;
    }
    ASSERT_LE((*engine)->kv().usage().blocks_used, 8u) << "step " << steps;
  }
  EXPECT_EQ(generated, (std::vector<size_t>{10000, 10000}));
  EXPECT_GT(10000u, 10 * m.model->config().context_length);
  EXPECT_GE((*engine)->metrics().kv_evicted_tokens_total, 2u * (10000 - 64));
}

// StreamingLLM's claim on the default model: a stream of 1,536 tokens of held-out text (3 contexts) as one
// sequence under sinks with a budget of 128 (a quarter of the context) stays within 5% of the full cache
// recomputed every 256 tokens (measured: +0.8% at 10,240 tokens, docs/KV_CACHE.md), and so does the sliding
// window at positions in the sequence, whose distances never leave the trained range.
TEST_F(KvEviction, SinksKeepTheStreamsPerplexityWithinFivePercentOfTheFullCache) {
  test::DefaultModel m;
  const std::string text = test::read_file(test::shared_path("eval/tinystories_valid_head.txt"));
  const StreamPerplexityOptions base{.max_tokens = 1536};
  auto full = evaluate_strided_perplexity(*m.model, *m.tokenizer, m.pool, text, base, 512, 256);
  ASSERT_TRUE(full) << full.status().message();
  StreamPerplexityOptions sinks = base;
  sinks.kv.policy = policy(KvPolicyKind::kSinks, 128);
  auto streamed = evaluate_stream_perplexity(*m.model, *m.tokenizer, m.pool, text, sinks);
  ASSERT_TRUE(streamed) << streamed.status().message();
  EXPECT_LE(streamed->perplexity, 1.05 * full->perplexity);
  EXPECT_GT(streamed->perplexity, 1.0);
  EXPECT_EQ(streamed->kv_blocks_peak, 128u / 16);
  EXPECT_EQ(streamed->evicted_tokens, 1536u - 128);
  StreamPerplexityOptions window = base;
  window.kv.window = 128;
  auto windowed = evaluate_stream_perplexity(*m.model, *m.tokenizer, m.pool, text, window);
  ASSERT_TRUE(windowed) << windowed.status().message();
  EXPECT_LE(windowed->perplexity, 1.05 * full->perplexity);
  // The full cache cannot hold a stream longer than the context.
  StreamPerplexityOptions too_long = base;
  EXPECT_EQ(evaluate_stream_perplexity(*m.model, *m.tokenizer, m.pool, text, too_long).status().code(),
            ErrorCode::kOutOfRange);
}
}  // namespace
}  // namespace kvs
