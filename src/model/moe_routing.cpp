#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "tensor/ops.h"

namespace kvs {

void route_token(std::span<const float> logits, const MoeConfig& config, std::span<float> scores,
                 std::span<ExpertChoice> chosen) {
  const size_t experts = config.num_experts, k = config.experts_used;
  KVS_ASSERT(logits.size() == experts && scores.size() >= experts && chosen.size() == k && k <= experts,
             "routing {} logits to {} of {} experts", logits.size(), chosen.size(), experts);
  std::copy(logits.begin(), logits.end(), scores.begin());
  if (config.gating == ExpertGating::kSoftmax) {
    softmax(scores.first(experts), Isa::kScalar);  // one summation order on every host
  } else {
    for (size_t e = 0; e < experts; ++e) scores[e] = 1.0f / (1.0f + std::exp(-scores[e]));
  }
  // k passes of a strict maximum: the first (lowest) index wins a tie. k and the expert count are small (6 of 64).
  float sum = 0.0f;
  for (size_t i = 0; i < k; ++i) {
    size_t best = experts;
    for (size_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (size_t j = 0; j < i; ++j) taken = taken || chosen[j].expert == e;
      if (!taken && (best == experts || scores[e] > scores[best])) best = e;
    }
    chosen[i] = {.expert = static_cast<uint32_t>(best), .weight = scores[best]};
    sum += scores[best];
  }
  for (ExpertChoice& c : chosen) {
    if (config.normalize_weights) c.weight /= sum;
    c.weight *= config.weights_scale;
  }
}

}  // namespace kvs
