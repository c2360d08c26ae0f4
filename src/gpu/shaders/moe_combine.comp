// A mixture of experts' output, one invocation a value (model/moe_ffn.h): out[t] = the shared experts' output (or 0)
// plus each chosen expert's output times its weight, added in expert-index order as the CPU adds them (products and
// sums not fused). y: [tokens][k][dim], the chosen experts' outputs in choice order.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Out { float out_rows[]; };  // [tokens][dim]: the shared experts' output, or any
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 3) readonly buffer Weights { float weights[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint dim;
  uint k;
  uint shared_experts;  // 0: out starts from 0
} push;

void main() {
  const uint id = gl_GlobalInvocationID.x;
  if (id >= push.tokens * push.dim) return;
  const uint t = id / push.dim, d = id % push.dim;
  float acc = push.shared_experts != 0u ? out_rows[id] : 0.0;
  // The k choices in expert-index order (k is small: a selection each pass).
  uint last = 0u;
  for (uint i = 0u; i < push.k; ++i) {
    uint pick = push.k;
    for (uint j = 0u; j < push.k; ++j) {
      const uint e = ids[t * push.k + j];
      if ((i == 0u || e > last) && (pick == push.k || e < ids[t * push.k + pick])) pick = j;
    }
    last = ids[t * push.k + pick];
    precise float product = weights[t * push.k + pick] * y[(t * push.k + pick) * push.dim + d];
    precise float sum = acc + product;
    acc = sum;
  }
  out_rows[id] = acc;
}
