// RMSNorm of `rows` rows of `cols` floats: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, one workgroup a row (the CPU
// twin: tensor/ops.h rmsnorm). Rows lie `stride` floats apart in x and y (0: cols): MLA norms the first r of a latent
// row. The sum of squares is fp32: lane partials, then subgroupAdd, then the subgroups' sums.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // specialization constant 0: the workgroup size (<= 512)

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint cols;
  float eps;
  uint stride;
} push;

shared float subgroup_sums[64];

void main() {
  const uint row = gl_WorkGroupID.x, base = row * (push.stride == 0u ? push.cols : push.stride);
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < push.cols; i += gl_WorkGroupSize.x) ss += x[base + i] * x[base + i];
  ss = subgroupAdd(ss);
  if (subgroupElect()) subgroup_sums[gl_SubgroupID] = ss;
  barrier();
  float total = 0.0;
  for (uint s = 0; s < gl_NumSubgroups; ++s) total += subgroup_sums[s];
  const float scale = inversesqrt(total / float(push.cols) + push.eps);
  for (uint i = gl_LocalInvocationID.x; i < push.cols; i += gl_WorkGroupSize.x) y[base + i] = x[base + i] * scale * w[i];
}
