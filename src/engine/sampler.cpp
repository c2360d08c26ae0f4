#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/splitmix64.h"

namespace kvs {

Status SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return Status::invalid_argument(fmt::format("temperature must be >= 0, got {}", temperature));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return Status::invalid_argument(fmt::format("top_p must be in (0, 1], got {}", top_p));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return Status::invalid_argument(fmt::format("min_p must be in [0, 1], got {}", min_p));
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return Status::invalid_argument(fmt::format("repetition penalty must be > 0, got {}", repetition_penalty));
  }
  for (const auto& [name, value] :
       {std::pair{"frequency", frequency_penalty}, std::pair{"presence", presence_penalty}}) {
    if (!(value >= -2.0f && value <= 2.0f)) {
      return Status::invalid_argument(fmt::format("{} penalty must be in [-2, 2], got {}", name, value));
    }
  }
  for (const auto& [token, bias] : logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return Status::invalid_argument(
          fmt::format("logit bias of token {} must be in [-100, 100], got {}", token, bias));
    }
  }
  return Status::ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_state_(params.seed) {}

float Sampler::next_uniform() { return static_cast<float>(splitmix64(rng_state_) >> 40) * (1.0f / 16777216.0f); }

namespace {
// The largest value, as four independent running maxima: a single one is a chain of dependent
// compare-and-selects (measured at several cycles per element over 32,000 logits).
float max_value(std::span<const float> values) {
  float m[4] = {values[0], values[0], values[0], values[0]};
  size_t i = 0;
  for (; i + 4 <= values.size(); i += 4)
    for (size_t k = 0; k < 4; ++k) m[k] = values[i + k] > m[k] ? values[i + k] : m[k];
  for (; i < values.size(); ++i) m[0] = values[i] > m[0] ? values[i] : m[0];
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}
}  // namespace

double log_sum_exp(std::span<const float> logits) {
  double max = logits[0];
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

double token_logprob(std::span<const float> logits, TokenId token) {
  KVS_ASSERT(token >= 0 && static_cast<size_t>(token) < logits.size(), "token {} outside {} logits", token,
             logits.size());
  return static_cast<double>(logits[static_cast<size_t>(token)]) - log_sum_exp(logits);
}

TokenLogprob token_logprob_entry(std::span<const float> logits, TokenId token, size_t top) {
  KVS_ASSERT(token >= 0 && static_cast<size_t>(token) < logits.size(), "token {} outside {} logits", token,
             logits.size());
  const double normalizer = log_sum_exp(logits);
  TokenLogprob entry{.token = token, .logprob = static_cast<float>(logits[static_cast<size_t>(token)] - normalizer)};
  top = std::min(top, logits.size());
  if (top == 0) return entry;
  std::vector<TokenId> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<TokenId>(i);
  const auto more_likely = [&](TokenId a, TokenId b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(top), ids.end(), more_likely);
  for (size_t i = 0; i < top; ++i) entry.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - normalizer));
  return entry;
}

// The first index of the largest value, as std::max_element gives it (NaNs never win unless first), in two
// passes that vectorize: the maximum, then where it first occurs. std::max_element's dependent chain took
// ~30 us over 32,000 logits, once per sequence per step of a batch.
TokenId argmax(std::span<const float> logits) {
  if (logits.empty()) return 0;
  const float m = max_value(logits);
  const auto it = std::find(logits.begin(), logits.end(), m);
  return it == logits.end() ? 0 : static_cast<TokenId>(it - logits.begin());
}

std::span<const float> Sampler::adjusted(std::span<const float> logits, std::span<const TokenId> recent,
                                         std::span<const TokenId> generated) {
  const bool repetition = params_.repetition_penalty != 1.0f && !recent.empty();
  const bool counts = (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) && !generated.empty();
  if (!repetition && !counts && params_.logit_bias.empty()) return logits;
  scratch_logits_.assign(logits.begin(), logits.end());
  const auto in_vocabulary = [&](TokenId id) { return id >= 0 && static_cast<size_t>(id) < scratch_logits_.size(); };
  if (repetition) {
    const size_t window = std::min(recent.size(), params_.repetition_window);
    // Each distinct token is penalised once, however often it occurs (as llama.cpp does).
    std::vector<TokenId> seen(recent.end() - window, recent.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (TokenId id : seen) {
      if (!in_vocabulary(id)) continue;
      float& l = scratch_logits_[id];
      l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
  }
  if (counts) {  // each distinct generated token once, with its count
    counted_.assign(generated.begin(), generated.end());
    std::sort(counted_.begin(), counted_.end());
    for (size_t i = 0; i < counted_.size();) {
      size_t j = i;
      while (j < counted_.size() && counted_[j] == counted_[i]) ++j;
      if (in_vocabulary(counted_[i])) {
        scratch_logits_[counted_[i]] -=
            static_cast<float>(j - i) * params_.frequency_penalty + params_.presence_penalty;
      }
      i = j;
    }
  }
  for (const auto& [id, bias] : params_.logit_bias)
    if (in_vocabulary(id)) scratch_logits_[id] += bias;
  return scratch_logits_;
}

TokenId Sampler::sample(std::span<const float> logits, std::span<const TokenId> recent,
                        std::span<const TokenId> generated) {
  const std::span<const float> work = adjusted(logits, recent, generated);
  if (params_.temperature == 0.0f) return argmax(work);

  const size_t vocab = work.size();
  const size_t limit = params_.top_k > 0 && params_.top_k < vocab ? params_.top_k : vocab;  // top-k's candidates
  const bool truncates = params_.top_p < 1.0f || params_.min_p > 0.0f;
  const float temperature = params_.temperature;
  if (limit == vocab && !truncates) return draw_from_all(work, max_value(work), temperature);

  // Only a prefix of the candidates in logit order can be kept: sort just that much (O(vocab log k)),
  // growing it until min-p or top-p is decided inside it.
  candidates_.clear();
  candidates_.reserve(vocab);
  for (size_t i = 0; i < vocab; ++i) candidates_.emplace_back(work[i], static_cast<TokenId>(i));
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t sorted = limit < vocab ? limit : std::min<size_t>(vocab, 64);
  std::partial_sort(candidates_.begin(), candidates_.begin() + sorted, candidates_.end(), by_logit);
  const float max_logit = candidates_.front().first;
  const auto weight = [max_logit, temperature](float logit) { return std::exp((logit - max_logit) / temperature); };
  float sum = 0.0f;  // softmax denominator over the top-k set (all tokens without top-k)
  if (limit < vocab) {
    for (size_t i = 0; i < limit; ++i) sum += weight(candidates_[i].first);
  } else {
    for (float l : work) sum += weight(l);
  }
  size_t kept = 0;
  for (;;) {
    // Probabilities in descending order: min-p keeps those >= min_p x the largest, top-p the smallest
    // prefix whose mass reaches top_p; the kept set is the shorter of the two prefixes.
    const float threshold = params_.min_p * weight(candidates_.front().first) / sum;
    float mass = 0.0f;
    bool decided = false;
    for (kept = 0; kept < sorted && !decided;) {
      const float p = weight(candidates_[kept].first) / sum;
      if (kept > 0 && p < threshold) {
        decided = true;
        break;
      }
      mass += p;
      ++kept;
      decided = params_.top_p < 1.0f && mass >= params_.top_p;
    }
    if (decided || sorted == limit) break;
    sorted = std::min(limit, sorted * 8);
    std::partial_sort(candidates_.begin(), candidates_.begin() + sorted, candidates_.end(), by_logit);
  }
  float total = 0.0f;
  for (size_t i = 0; i < kept; ++i) total += weight(candidates_[i].first);
  float r = next_uniform() * total;
  for (size_t i = 0; i < kept; ++i) {
    const float p = weight(candidates_[i].first);
    if (r < p) return candidates_[i].second;
    r -= p;
  }
  return candidates_[kept - 1].second;
}

TokenId Sampler::draw_from_all(std::span<const float> logits, float max_logit, float temperature) {
  // No truncation: a draw from the whole softmax in vocabulary order, O(vocab) and no sort.
  weights_.resize(logits.size());
  float total = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) total += (weights_[i] = std::exp((logits[i] - max_logit) / temperature));
  float r = next_uniform() * total;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i] <= 0.0f) continue;
    if (r < weights_[i]) return static_cast<TokenId>(i);
    r -= weights_[i];
    last_nonzero = i;
  }
  return static_cast<TokenId>(last_nonzero);  // r left over from rounding
}

}  // namespace kvs
