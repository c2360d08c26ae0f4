#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

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
  return Status::ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_state_(params.seed) {}

float Sampler::next_uniform() {
  // splitmix64: tiny, fast and identical on every platform for a given seed.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

TokenId argmax(std::span<const float> logits) {
  return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TokenId Sampler::sample(std::span<const float> logits, std::span<const TokenId> recent) {
  std::span<const float> work = logits;
  if (params_.repetition_penalty != 1.0f && !recent.empty()) {
    scratch_logits_.assign(logits.begin(), logits.end());
    const size_t window = std::min(recent.size(), params_.repetition_window);
    // Each distinct token is penalised once, however often it occurs (as llama.cpp does).
    std::vector<TokenId> seen(recent.end() - window, recent.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (TokenId id : seen) {
      if (id < 0 || static_cast<size_t>(id) >= scratch_logits_.size()) continue;
      float& l = scratch_logits_[id];
      l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
    work = scratch_logits_;
  }
  if (params_.temperature == 0.0f) return argmax(work);

  candidates_.clear();
  candidates_.reserve(work.size());
  for (size_t i = 0; i < work.size(); ++i) candidates_.emplace_back(work[i], static_cast<TokenId>(i));
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && params_.top_k < keep) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax with temperature over the sorted candidates (largest first).
  const float max_logit = candidates_.front().first;
  float sum = 0.0f;
  for (auto& [value, id] : candidates_) {
    value = std::exp((value - max_logit) / params_.temperature);
    sum += value;
  }
  for (auto& c : candidates_) c.first /= sum;
  // min-p: drop tokens far less likely than the best one.
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p * candidates_.front().first;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].first >= threshold) ++n;
    candidates_.resize(n);
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    float mass = 0.0f;
    size_t n = 0;
    while (n < candidates_.size()) {
      mass += candidates_[n++].first;
      if (mass >= params_.top_p) break;
    }
    candidates_.resize(n);
  }
  float total = 0.0f;
  for (const auto& c : candidates_) total += c.first;
  float r = next_uniform() * total;
  for (const auto& [p, id] : candidates_) {
    if (r < p) return id;
    r -= p;
  }
  return candidates_.back().second;
}

}  // namespace kvs
