// The gated linear unit of the FFN over n values, in place: gate[i] = act(gate[i]) * up[i], act by specialization
// constant 1: 0 SiLU, g / (1 + e^-g) (SwiGLU, the Llama family); 1 GELU in its tanh form, written as the CPU's
// g / (1 + e^(g (a + b g^2))) with a = -2 sqrt(2/pi), b = a 0.044715 (GeGLU, Gemma). The CPU twins: tensor/ops.h swiglu
// and geglu. One invocation a value.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kActivation = 0;

layout(std430, binding = 0) buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(push_constant) uniform Push { uint n; } push;

const float kGeluA = -2.0 * 0.7978845608028654;
const float kGeluB = -2.0 * 0.7978845608028654 * 0.044715;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= push.n) return;
  const float g = gate[i];
  const float e = kActivation == 0 ? exp(-g) : exp(g * (kGeluA + kGeluB * g * g));
  gate[i] = g / (1.0 + e) * up[i];
}
