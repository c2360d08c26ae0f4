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

TEST(Sampler, ValidateNamesTheBadValue) {
  EXPECT_NE(SamplingParams{.temperature = -1.0f}.validate().message().find("-1"), std::string::npos);
  EXPECT_NE(SamplingParams{.top_p = 0.0f}.validate().message().find("top_p"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.validate().is_ok());
}

}  // namespace
}  // namespace kvs
