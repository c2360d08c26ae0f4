#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace kvs {
namespace {

TEST(Sampler, GreedyPicksArgmaxWithLowestIndexOnTies) {
  Sampler s({.temperature = 0.0f});
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits, {}), 1);
}

TEST(Argmax, MatchesMaxElementOnRandomTiedAndNanInputs) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> level(-20, 20);  // few distinct values: many ties
  for (size_t n : {1, 3, 4, 5, 31, 32000}) {
    std::vector<float> v(n);
    for (int round = 0; round < 20; ++round) {
      for (float& x : v) x = static_cast<float>(level(rng)) * 0.25f;
      if (round % 4 == 1) v[rng() % n] = std::nanf("");  // a NaN somewhere never wins...
      if (round % 4 == 2) v[0] = std::nanf("");          // ...unless it comes first
      const auto want = static_cast<TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
      ASSERT_EQ(argmax(v), want) << "n " << n << " round " << round;
    }
  }
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -INFINITY}), 0);
}

TEST(Sampler, TopKOneIsGreedyWhateverTheTemperature) {
  Sampler s({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f, .seed = 7});
  const std::vector<float> logits = {0.5f, 0.4f, 3.0f, 0.0f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits, {}), 2);
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  const std::vector<float> logits(64, 0.0f);  // uniform
  auto draws = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed});
    std::vector<TokenId> out;
    for (int i = 0; i < 32; ++i) out.push_back(s.sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draws(1), draws(1));
  EXPECT_NE(draws(1), draws(2));
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
  // p = softmax([ln 6, ln 3, ln 1]) = 0.6, 0.3, 0.1: top_p 0.8 keeps tokens 0 and 1 only.
  const std::vector<float> logits = {std::log(6.0f), std::log(3.0f), std::log(1.0f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .min_p = 0.0f, .seed = 3});
  std::map<TokenId, int> counts;
  for (int i = 0; i < 3000; ++i) ++counts[s.sample(logits, {})];
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / 3000.0, 2.0 / 3.0, 0.04);  // renormalised 0.6 / 0.9
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // p = 0.6, 0.3, 0.1; min_p 0.2 keeps p >= 0.12: tokens 0 and 1.
  const std::vector<float> logits = {std::log(6.0f), std::log(3.0f), std::log(1.0f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.2f, .seed = 9});
  for (int i = 0; i < 2000; ++i) EXPECT_NE(s.sample(logits, {}), 2);
}

TEST(Sampler, RepetitionPenaltyChangesGreedyChoiceOncePerDistinctToken) {
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
  Sampler s({.temperature = 0.0f, .repetition_penalty = 1.5f});
  const std::vector<TokenId> recent = {0, 0, 0};  // 2.0 / 1.5 = 1.33 < 1.5 (not 2.0 / 1.5^3)
  EXPECT_EQ(s.sample(logits, recent), 1);
  Sampler mild({.temperature = 0.0f, .repetition_penalty = 1.2f});
  EXPECT_EQ(mild.sample(logits, recent), 0);  // 2.0 / 1.2 = 1.67 > 1.5
}

TEST(Sampler, DrawsWithoutTruncationFollowTheSoftmax) {
  // p = 0.6, 0.3, 0.1 at temperature 1; at temperature 2 the logits halve: p ~ sqrt(6), sqrt(3), 1.
  const std::vector<float> logits = {std::log(6.0f), std::log(3.0f), std::log(1.0f)};
  for (float temperature : {1.0f, 2.0f}) {
    Sampler s({.temperature = temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5});
    std::map<TokenId, int> counts;
    const int n = 20000;
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits, {})];
    double z = 0.0;
    std::vector<double> p;
    for (float l : logits) z += std::exp(l / temperature);
    for (size_t t = 0; t < logits.size(); ++t) {
      EXPECT_NEAR(counts[static_cast<TokenId>(t)] / static_cast<double>(n), std::exp(logits[t] / temperature) / z,
                  0.015)
          << "token " << t << " temperature " << temperature;
    }
  }
}

TEST(Sampler, TopPOverALargeVocabularyKeepsTheWholeNucleus) {
  // 5000 tokens; 700 of them (every 7th id) share the top logit: top_p 0.5 keeps 350 of those, the
  // lowest ids among the ties (a nucleus far past the first sorted prefix the sampler tries).
  std::vector<float> logits(5000, -30.0f);
  std::vector<TokenId> top;
  for (size_t i = 0; i < 700; ++i) {
    logits[i * 7] = 2.0f;
    top.push_back(static_cast<TokenId>(i * 7));
  }
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.5f, .min_p = 0.0f, .seed = 8});
  std::map<TokenId, int> counts;
  for (int i = 0; i < 20000; ++i) ++counts[s.sample(logits, {})];
  const TokenId last_kept = top[350];  // float rounding may keep one more
  for (const auto& [id, c] : counts) EXPECT_LE(id, last_kept) << "drew token " << id << " outside the nucleus";
  EXPECT_GE(counts.size(), 340u);  // ~57 draws each: all of the nucleus shows up
}

// OpenAI's formula: a token generated c times loses c x frequency_penalty + (c > 0) x presence_penalty. Token 0
// (logit 5) was generated twice, token 1 (4.5) never: greedy keeps 0 while 2f + p < 0.5 and switches past it.
// Prompt tokens do not count: only the generated span does.
TEST(Sampler, FrequencyAndPresencePenaltiesFollowOpenAisFormula) {
  const std::vector<float> logits = {5.0f, 4.5f, 1.0f};
  const std::vector<TokenId> generated = {0, 2, 0};
  const auto greedy = [&](float frequency, float presence, std::span<const TokenId> gen) {
    Sampler s({.temperature = 0.0f, .frequency_penalty = frequency, .presence_penalty = presence});
    return s.sample(logits, generated, gen);
  };
  EXPECT_EQ(greedy(0.24f, 0.0f, generated), 0);  // 5 - 0.48 = 4.52 > 4.5
  EXPECT_EQ(greedy(0.26f, 0.0f, generated), 1);  // 4.48
  EXPECT_EQ(greedy(0.0f, 0.49f, generated), 0);  // 4.51
  EXPECT_EQ(greedy(0.0f, 0.51f, generated), 1);  // 4.49
  EXPECT_EQ(greedy(0.2f, 0.09f, generated), 0);  // 4.51
  EXPECT_EQ(greedy(0.2f, 0.11f, generated), 1);  // 4.49
  EXPECT_EQ(greedy(2.0f, 2.0f, {}), 0);          // the same tokens in the prompt only: no penalty
  // Negative penalties favour what was generated: token 1, once, with -0.6 presence beats token 0.
  EXPECT_EQ(greedy(0.0f, -0.6f, std::vector<TokenId>{1}), 1);
}

// logit_bias adds to the logits: -100 bans the argmax, +100 forces a token; sampling at temperature 1 follows the
// softmax of the biased logits.
TEST(Sampler, LogitBiasShiftsTheDistribution) {
  const std::vector<float> logits = {std::log(6.0f), std::log(3.0f), std::log(1.0f)};
  EXPECT_EQ(Sampler({.temperature = 0.0f, .logit_bias = {{0, -100.0f}}}).sample(logits, {}), 1);
  EXPECT_EQ(Sampler({.temperature = 0.0f, .logit_bias = {{2, 100.0f}}}).sample(logits, {}), 2);
  // +log 6 on token 2: p = 6, 3, 6 of 15.
  Sampler s(
      {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .logit_bias = {{2, std::log(6.0f)}}, .seed = 11});
  std::map<TokenId, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits, {})];
  for (const auto& [token, p] : std::vector<std::pair<TokenId, double>>{{0, 0.4}, {1, 0.2}, {2, 0.4}})
    EXPECT_NEAR(counts[token] / static_cast<double>(n), p, 0.015) << "token " << token;
}

// The logprob entry: log-softmax in double of the raw logits, alternatives most likely first (ties: lower id).
TEST(TokenLogprobEntry, IsTheLogSoftmaxWithTheMostLikelyFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  const TokenLogprob e = token_logprob_entry(logits, 4, 3);
  EXPECT_EQ(e.token, 4);
  EXPECT_NEAR(e.logprob, 0.5 - std::log(z), 1e-6);
  ASSERT_EQ(e.top.size(), 3u);
  EXPECT_EQ(e.top[0].first, 1);
  EXPECT_EQ(e.top[1].first, 2);
  EXPECT_EQ(e.top[2].first, 0);
  EXPECT_NEAR(e.top[2].second, 1.0 - std::log(z), 1e-6);
  EXPECT_TRUE(token_logprob_entry(logits, 0, 0).top.empty());
  EXPECT_EQ(token_logprob_entry(logits, 0, 99).top.size(), logits.size());
}

TEST(Sampler, ValidateNamesTheBadValue) {
  EXPECT_NE(SamplingParams{.temperature = -1.0f}.validate().message().find("-1"), std::string::npos);
  EXPECT_NE(SamplingParams{.top_p = 0.0f}.validate().message().find("top_p"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.validate().is_ok());
  EXPECT_NE(SamplingParams{.frequency_penalty = 2.5f}.validate().message().find("frequency penalty must be in [-2, 2]"),
            std::string::npos);
  const SamplingParams bad_bias{.logit_bias = {{7, 101.0f}}};
  EXPECT_NE(bad_bias.validate().message().find("token 7"), std::string::npos);
}

}  // namespace
}  // namespace kvs
