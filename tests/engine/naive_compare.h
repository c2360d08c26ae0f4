// An engine run against the naive llama reference (tests/model/naive_llama_forward.h), token by token.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine_trace.h"
#include "model/naive_llama_forward.h"

namespace kvs::test {

// Feeds `reference` the tokens the engine computed (the prompt, then each generated token but the last) and
// returns the largest difference between its logits and the trace's; each generated token must be the
// reference's argmax.
inline float worst_against_naive(testing::NaiveLlama& reference, const std::vector<TokenId>& prompt,
                                 const EngineTrace& trace, const std::string& what) {
  std::vector<TokenId> fed = prompt;
  fed.insert(fed.end(), trace.tokens.begin(), trace.tokens.end() - 1);
  float worst = 0.0f;
  for (size_t p = 0; p < fed.size(); ++p) {
    const std::vector<float> want = reference.step(fed[p]);
    const std::vector<float>& got = trace.logits.at(p);
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    if (p + 1 >= prompt.size()) {
      EXPECT_EQ(trace.tokens[p + 1 - prompt.size()], testing::argmax(want)) << what << " position " << p;
    }
  }
  return worst;
}

}  // namespace kvs::test
