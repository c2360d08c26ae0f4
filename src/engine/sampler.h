// Turns logits into the next token: the logit adjustments (repetition penalty; OpenAI's frequency and presence
// penalties over the generated tokens; logit bias), then greedy (temperature 0) or
// top-k -> temperature -> softmax -> min-p -> top-p -> a draw from a seeded generator.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
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
  // OpenAI's: a token generated c times so far loses c x frequency_penalty + (c > 0) x presence_penalty from its
  // logit (both in [-2, 2]; 0 = off). Counted over the generated tokens only, not the prompt.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  std::vector<std::pair<TokenId, float>> logit_bias = {};  // added to those tokens' logits ([-100, 100] each)
  uint64_t seed = 0;

  Status validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `recent` are the last tokens of the context (prompt and generated), oldest first; `generated` the tokens this
  // sequence generated so far (the frequency and presence penalties count them).
  TokenId sample(std::span<const float> logits, std::span<const TokenId> recent,
                 std::span<const TokenId> generated = {});

 private:
  float next_uniform();  // in [0, 1)
  // A draw from softmax(logits / temperature) over every token.
  TokenId draw_from_all(std::span<const float> logits, float max_logit, float temperature);

  // The logits after the repetition, frequency and presence penalties and the logit bias (`logits` itself when none
  // applies).
  std::span<const float> adjusted(std::span<const float> logits, std::span<const TokenId> recent,
                                  std::span<const TokenId> generated);

  SamplingParams params_;
  uint64_t rng_state_;
  std::vector<float> scratch_logits_;
  std::vector<TokenId> counted_;  // the generated tokens, sorted (frequency and presence penalties)
  std::vector<std::pair<float, TokenId>> candidates_;  // (logit, id), sorted by logit as far as needed
  std::vector<float> weights_;                         // unnormalised softmax of a draw from all tokens
};

// A token's log-probability under the model (log-softmax of the logits it was drawn from: before temperature,
// penalties and bias, as OpenAI's logprobs), and the most likely tokens there.
struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<TokenId, float>> top = {};  // the `top` most likely (id, logprob), most likely first
};
// `token`'s entry with the `top` most likely tokens (ties: the lower id first).
TokenLogprob token_logprob_entry(std::span<const float> logits, TokenId token, size_t top);

// log(sum over i of exp(logits[i])), in double (shifted by the maximum): softmax's log normalizer.
double log_sum_exp(std::span<const float> logits);
// log softmax(logits)[token] = logits[token] - log_sum_exp(logits).
double token_logprob(std::span<const float> logits, TokenId token);

// Index of the largest value; ties go to the lowest index.
TokenId argmax(std::span<const float> logits);

}  // namespace kvs
