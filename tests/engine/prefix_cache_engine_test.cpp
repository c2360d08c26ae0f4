// Prefix caching through the engine on the default model: output with the cache equals output without
// it (greedy ids, and every logits row computed) for repeated prompts, prompts sharing 1, 17 and 300
// tokens under block sizes 1, 16 and 256, chat turns that extend the previous turn, eviction under a
// small pool, preemption and resumption, and salts that isolate tenants.
//
// Bound: a hit reuses K/V bits computed in another batch; each kernel's result for a row does not depend
// on the batch it is in (tests/tensor), so the logits are expected bitwise equal, and the bound is the
// 1e-5 that paged attention keeps against the contiguous cache (a reordered sum, tests/engine/paged_kv).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "default_model.h"
#include "engine_trace.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 1e-5f;

using Fixture = test::DefaultModel;

std::vector<TokenId> concat(std::vector<TokenId> a, std::span<const TokenId> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One engine kept across requests (its cache persists).
class Session : public test::EngineSession {
 public:
  Session(Fixture& f, const EngineConfig& config) : EngineSession(*f.model, *f.tokenizer, f.pool, config) {}
};

// The same request on a fresh engine without a prefix cache: the reference.
test::EngineTrace reference(Fixture& f, EngineConfig config, RequestParams params) {
  config.kv.prefix_caching = false;
  return test::trace_request(*f.model, *f.tokenizer, f.pool, config, std::move(params));
}

void expect_same_output(const test::EngineTrace& cached, const test::EngineTrace& ref) {
  test::expect_cached_run_matches(cached, ref, kLogitBound);
}

TEST(PrefixCacheEngine, ARepeatedPromptHitsAllButItsLastToken) {
  Fixture f;
  const EngineConfig config{.max_seqs = 4};
  Session session(f, config);
  const auto prompt = f.random_tokens(41, 1);
  const test::EngineTrace first = session.run(test::greedy_request(prompt, 12));
  const test::EngineTrace second = session.run(test::greedy_request(prompt, 12));
  EXPECT_EQ(first.result.cached_tokens, 0u);
  EXPECT_EQ(second.result.cached_tokens, prompt.size() - 1);
  EXPECT_EQ(second.logits.size(), 1u + 12 - 1) << "the last prompt token and the generated ones but the last";
  expect_same_output(second, reference(f, config, test::greedy_request(prompt, 12)));
  const EngineMetrics m = session.engine().metrics();
  EXPECT_EQ(m.prefix_cache_queries_tokens_total, 2 * prompt.size());
  EXPECT_EQ(m.prefix_cache_hits_tokens_total, prompt.size() - 1);
}

// Two prompts that share `shared` tokens, then differ: the second takes exactly the shared tokens from
// the cache (whole blocks shared, the rest copied from the partial match), whatever the block size.
TEST(PrefixCacheEngine, SharedPrefixesOfAnyLengthUnderEveryBlockSize) {
  Fixture f;
  for (size_t block_size : {1u, 16u, 256u}) {
    for (size_t shared : {1u, 17u, 300u}) {
      SCOPED_TRACE("block size " + std::to_string(block_size) + ", shared " + std::to_string(shared));
      const EngineConfig config{.max_seqs = 2, .kv = {.block_size = block_size}};
      Session session(f, config);
      const auto prefix = f.random_tokens(shared, 10 + shared);
      auto a = concat(prefix, f.random_tokens(9, 100));
      auto b = concat(prefix, f.random_tokens(7, 200));
      ASSERT_NE(a[shared], b[shared]);
      session.run(test::greedy_request(a, 8));
      const test::EngineTrace hit = session.run(test::greedy_request(b, 8));
      EXPECT_EQ(hit.result.cached_tokens, shared);
      // What the partial-block copy saves: block-granular matching would reuse only the whole blocks.
      const size_t copied = session.engine().metrics().prefix_cache_copied_tokens_total;
      EXPECT_EQ(copied, shared % block_size);
      std::printf("block size %3zu, shared %3zu: %3zu reused, %3zu of them copied from a partial block\n", block_size,
                  shared, hit.result.cached_tokens, copied);
      expect_same_output(hit, reference(f, config, test::greedy_request(b, 8)));
    }
  }
}

// Each turn's prompt is the whole previous conversation (its prompt and reply) plus a new message: all
// of the previous turn but its last token (whose K/V were never computed) comes from the cache.
TEST(PrefixCacheEngine, ChatTurnsReuseTheWholePreviousTurn) {
  Fixture f;
  const EngineConfig config{.max_seqs = 2};
  Session session(f, config);
  std::vector<TokenId> conversation = f.random_tokens(20, 5);
  for (int turn = 0; turn < 4; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    const size_t previous = conversation.size();
    const test::EngineTrace t = session.run(test::greedy_request(conversation, 10));
    if (turn > 0) {
      EXPECT_EQ(t.result.cached_tokens, previous - 7 - 1) << "all of the previous turn but its last token";
    }
    expect_same_output(t, reference(f, config, test::greedy_request(conversation, 10)));
    conversation = concat(conversation, t.tokens);
    conversation = concat(conversation, f.random_tokens(7, 50 + turn));
  }
}

// A pool of 12 blocks: prompts evict each other's cached blocks; the first prompt, asked again, is still
// answered exactly (from what is left of its blocks).
TEST(PrefixCacheEngine, EvictionUnderASmallPoolKeepsOutputsExact) {
  Fixture f;
  const EngineConfig config{.max_seqs = 1, .kv = {.blocks = 12}};
  Session session(f, config);
  std::vector<std::vector<TokenId>> prompts;
  for (uint64_t i = 0; i < 6; ++i) prompts.push_back(f.random_tokens(60, 300 + i));
  for (const auto& p : prompts) session.run(test::greedy_request(p, 20));
  EXPECT_GT(session.engine().metrics().prefix_cache_evictions_total, 0u);
  for (const auto& p : {prompts.front(), prompts.back()}) {
    const test::EngineTrace again = session.run(test::greedy_request(p, 20));
    expect_same_output(again, reference(f, config, test::greedy_request(p, 20)));
  }
  EXPECT_GT(session.engine().metrics().kv_blocks_cached_idle, 0u);
}

// Eight requests sharing a 100-token system prompt in a pool too small for all: preempted requests keep
// their full blocks cached and hit when resumed; every output equals the request run alone without a cache.
TEST(PrefixCacheEngine, PreemptedRequestsResumeFromTheCacheWithTheSameOutput) {
  Fixture f;
  const auto system = f.random_tokens(100, 77);
  std::vector<RequestParams> requests;
  for (uint64_t i = 0; i < 8; ++i) requests.push_back(test::greedy_request(concat(system, f.random_tokens(5, i)), 60));
  const EngineConfig tight{.max_batch_tokens = 64, .max_seqs = 8, .kv = {.blocks = 24}};
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, tight);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<std::vector<TokenId>> got(requests.size());
  std::vector<size_t> cached(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = (*engine)->add_request(requests[i], [&, i](const RequestOutput& o) {
      got[i].insert(got[i].end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) cached[i] = o.cached_tokens;
    });
    ASSERT_TRUE(id) << id.status().message();
  }
  while ((*engine)->step()) {
    const Status s = (*engine)->kv().check_invariants();
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_GT(m.preemptions_total, 0u);
  EXPECT_EQ(m.kv_blocks_used, 0u);
  size_t sharers = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i], reference(f, {}, requests[i]).tokens) << "request " << i;
    sharers += cached[i] >= 64;
  }
  EXPECT_GE(sharers, 4u) << "requests admitted after the first share its system prompt";
  // Hits beyond the first admissions' are the resumed requests' own blocks.
  size_t first_admission_hits = 0;
  for (size_t c : cached) first_admission_hits += c;
  EXPECT_GT(m.prefix_cache_hits_tokens_total, first_admission_hits) << "resumed requests hit";
}

TEST(PrefixCacheEngine, DifferentSaltsShareNothing) {
  Fixture f;
  Session session(f, {});
  const auto prompt = f.random_tokens(50, 9);
  RequestParams alice = test::greedy_request(prompt, 4), bob = alice;
  alice.cache_salt = "alice";
  bob.cache_salt = "bob";
  EXPECT_EQ(session.run(alice).result.cached_tokens, 0u);
  EXPECT_EQ(session.run(bob).result.cached_tokens, 0u);
  EXPECT_EQ(session.run(test::greedy_request(prompt, 4)).result.cached_tokens, 0u) << "no salt is its own tenant";
  EXPECT_EQ(session.run(alice).result.cached_tokens, prompt.size() - 1);
}

TEST(PrefixCacheEngine, OffComputesEveryPrompt) {
  Fixture f;
  Session session(f, {.kv = {.prefix_caching = false}});
  const auto prompt = f.random_tokens(50, 9);
  session.run(test::greedy_request(prompt, 4));
  EXPECT_EQ(session.run(test::greedy_request(prompt, 4)).result.cached_tokens, 0u);
  EXPECT_EQ(session.engine().metrics().prefix_cache_queries_tokens_total, 0u);
}

}  // namespace
}  // namespace kvs
