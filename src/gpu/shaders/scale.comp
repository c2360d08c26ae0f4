// x[i] *= factor over n values: Gemma's embedding scaled by sqrt(dim). Exact: one fp32 product, as on the CPU.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Push {
  uint n;
  float factor;
} push;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < push.n) x[i] *= push.factor;
}
