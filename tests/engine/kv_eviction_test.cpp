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

#include "engine_trace.h"
#include "model/naive_llama_forward.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

using testing::argmax;
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
          .pooled = resolved.scores == KvScoreScope::kPooled};
}

struct Recorded {
  std::vector<std::vector<std::vector<uint32_t>>> evictions;  // [eviction][row] kept slots
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
    const auto& engine = recorded.evictions[eviction++];
    ASSERT_EQ(engine.size(), kept.size()) << what;
    for (size_t r = 0; r < kept.size(); ++r) {
      const std::vector<size_t> got(engine[r].begin(), engine[r].end());
      if (got == kept[r]) continue;
      // Both sides of the cut must tie: every entry one kept and the other did not. Pooled: the summed scores.
      std::vector<double> mass = reference.masses(r);
      if (kept.size() == 1) {
        for (size_t row = 1; row < reference.num_rows(); ++row)
          for (size_t i = 0; i < mass.size(); ++i) mass[i] += reference.masses(row)[i];
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
  std::vector<TokenId> fed = prompt;
  fed.insert(fed.end(), trace.tokens.begin(), trace.tokens.end() - 1);
  float worst = 0.0f;
  for (size_t p = 0; p < fed.size(); ++p) {
    const std::vector<float> want = reference.step(fed[p]);
    const std::vector<float>& got = trace.logits.at(p);
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    if (p + 1 >= prompt.size()) {
      EXPECT_EQ(trace.tokens[p + 1 - prompt.size()], argmax(want)) << what << " position " << p;
    }
  }
  EXPECT_EQ(eviction, recorded.evictions.size()) << what << ": the engine evicted more often";
  EXPECT_LE(worst, 1e-4f) << what;
  return ties;
}

test::EngineTrace trace_with_policy(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                    const EngineConfig& config, RequestParams params, Recorded& recorded) {
  params.on_eviction = [&](const KvEvictionEvent& e) { recorded.evictions.emplace_back(e.kept.begin(), e.kept.end()); };
  return test::trace_request(model, tokenizer, pool, config, std::move(params));
}

// Every policy, prompts longer and shorter than the budget, chunks of 5 and 512, blocks of 4 and 8 (evictions of
// a block): the naive reference evicts the same entries and computes the same logits.
TEST_F(KvEviction, EachPolicyEqualsTheNaiveReferenceThatEvictsTheSameTokens) {
  const std::string path = synth("tiny-gqa");
  const test::LoadedModel m = test::load_model(path);
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file);
  const std::vector<KvPolicyParams> policies = {policy(KvPolicyKind::kWindow, 24), policy(KvPolicyKind::kSinks, 24),
                                                policy(KvPolicyKind::kHeavyHitters, 32, 0, 8),
                                                policy(KvPolicyKind::kHeavyHitters, 32, 2, 8, KvScoreScope::kPooled)};
  size_t ties = 0, decisions = 0;
  for (const KvPolicyParams& p : policies) {
    for (size_t block : {4, 8}) {
      for (size_t chunk : {5, 512}) {
        for (size_t prompt_tokens : {10, 45}) {
          const EngineConfig config{.max_batch_tokens = chunk, .max_seqs = 1, .block_size = block, .kv_policy = p};
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

}  // namespace
}  // namespace kvs
