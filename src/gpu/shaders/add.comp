// x[i] += y[i % period] over n values: the residual stream (period n) or a bias added to every row (period the row's
// width). Exact: one fp32 addition, as on the CPU.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint n;
  uint period;
} push;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < push.n) x[i] += y[i % push.period];
}
