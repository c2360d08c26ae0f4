// Mixture-of-experts routing as DeepSeek-V2 does it: a token's router logits become scores (softmax over all experts,
// or a sigmoid each), the experts_used highest scores choose its experts, and their weights are the chosen scores,
// optionally divided by their sum, times the scaling factor. Equal scores go to the lower expert index, so routing
// does not depend on a sort's stability.
#pragma once

#include <cstdint>
#include <span>

#include "model/model_config.h"

namespace kvs {

struct ExpertChoice {
  uint32_t expert = 0;
  float weight = 0.0f;
};

// Fills `chosen` (config.experts_used entries, by descending score, ties by index) from one token's router logits
// [num_experts]. `scores` is scratch of num_experts floats.
void route_token(std::span<const float> logits, const MoeConfig& config, std::span<float> scores,
                 std::span<ExpertChoice> chosen);

}  // namespace kvs
