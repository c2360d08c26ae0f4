// A mixture of experts' routing on the device, one invocation a token (model/moe_routing.h's route_token): the
// router's logits [tokens][experts] to scores (softmax: the maximum, e^(x - max) summed in order, times 1 / sum, as
// the CPU's scalar softmax; or sigmoid), then k passes of a strict maximum (the lowest index wins a tie), the chosen
// scores divided by their sum when the model normalizes them, then scaled. Out: per token its k experts and weights.
#version 450

layout(local_size_x_id = 0) in;

const uint kMaxExperts = 256;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) buffer Ids { uint ids[]; };          // [tokens][k]
layout(std430, binding = 2) buffer Weights { float weights[]; };  // [tokens][k]
layout(push_constant) uniform Push {
  uint tokens;
  uint experts;
  uint k;
  uint softmax;    // 1: softmax, 0: sigmoid
  uint normalize;  // 1: the chosen weights divided by their sum
  float scale;
} push;

float scores[kMaxExperts];

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= push.tokens) return;
  const uint base = t * push.experts;
  if (push.softmax != 0u) {
    float top = logits[base];
    for (uint e = 1u; e < push.experts; ++e) top = max(top, logits[base + e]);
    float sum = 0.0;
    for (uint e = 0u; e < push.experts; ++e) {
      scores[e] = exp(logits[base + e] - top);
      sum += scores[e];
    }
    const float inverse = 1.0 / sum;
    for (uint e = 0u; e < push.experts; ++e) scores[e] *= inverse;
  } else {
    for (uint e = 0u; e < push.experts; ++e) scores[e] = 1.0 / (1.0 + exp(-logits[base + e]));
  }
  float sum = 0.0;
  for (uint i = 0u; i < push.k; ++i) {
    uint best = push.experts;
    for (uint e = 0u; e < push.experts; ++e) {
      bool taken = false;
      for (uint j = 0u; j < i; ++j) taken = taken || ids[t * push.k + j] == e;
      if (!taken && (best == push.experts || scores[e] > scores[best])) best = e;
    }
    ids[t * push.k + i] = best;
    weights[t * push.k + i] = scores[best];
    sum += scores[best];
  }
  for (uint i = 0u; i < push.k; ++i) {
    float w = weights[t * push.k + i];
    if (push.normalize != 0u) w /= sum;
    weights[t * push.k + i] = w * push.scale;
  }
}
