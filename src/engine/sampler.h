// Turns logits into the next token: repetition penalty, then greedy (temperature 0) or
// top-k -> temperature -> softmax -> min-p -> top-p -> a draw from a seeded generator.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace kvs {

struct SamplingParams {
  float temperature = 0.8f;         // 0 = greedy
  size_t top_k = 40;                // 0 = off
  float top_p = 0.95f;              // 1 = off
  float min_p = 0.05f;              // 0 = off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1 = off; applies to tokens already in the context
  size_t repetition_window = 64;    // how many recent tokens the penalty looks at
  uint64_t seed = 0;

  Status validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `recent` are the last tokens of the context (prompt and generated), oldest first.
  TokenId sample(std::span<const float> logits, std::span<const TokenId> recent);

 private:
  float next_uniform();  // in [0, 1)
  // A draw from softmax(logits / temperature) over every token.
  TokenId draw_from_all(std::span<const float> logits, float max_logit, float temperature);

  SamplingParams params_;
  uint64_t rng_state_;
  std::vector<float> scratch_logits_;
  std::vector<std::pair<float, TokenId>> candidates_;  // (logit, id), sorted by logit as far as needed
  std::vector<float> weights_;                         // unnormalised softmax of a draw from all tokens
};

// log(sum over i of exp(logits[i])), in double (shifted by the maximum): softmax's log normalizer.
double log_sum_exp(std::span<const float> logits);
// log softmax(logits)[token] = logits[token] - log_sum_exp(logits).
double token_logprob(std::span<const float> logits, TokenId token);

// Index of the largest value; ties go to the lowest index.
TokenId argmax(std::span<const float> logits);

}  // namespace kvs
