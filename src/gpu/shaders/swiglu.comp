// gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i] over n values (the CPU twin: tensor/ops.h
// swiglu). One invocation a value.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(push_constant) uniform Push { uint n; } push;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= push.n) return;
  const float g = gate[i];
  gate[i] = g / (1.0 + exp(-g)) * up[i];
}
