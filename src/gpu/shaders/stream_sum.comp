// The streaming-read probe: every 32-bit word of `data` read once (as uvec4, grid-stride) and summed modulo 2^32;
// workgroup g writes its sum to sums[g]. The sum proves each word was read; timed, the pass is the device's read
// bandwidth (B*).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // specialization constant 0: the workgroup size (<= 512)

layout(std430, binding = 0) readonly buffer Data { uvec4 data[]; };
layout(std430, binding = 1) writeonly buffer Sums { uint sums[]; };
layout(push_constant) uniform Push { uint count; } push;  // uvec4 elements of data to read

shared uint subgroup_sums[64];  // one per subgroup: 512 invocations / subgroups of at least 8

void main() {
  uint acc = 0;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < push.count; i += stride) {
    const uvec4 v = data[i];
    acc += v.x + v.y + v.z + v.w;
  }
  acc = subgroupAdd(acc);
  if (subgroupElect()) subgroup_sums[gl_SubgroupID] = acc;
  barrier();
  if (gl_LocalInvocationIndex == 0) {
    uint total = 0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) total += subgroup_sums[s];
    sums[gl_WorkGroupID.x] = total;
  }
}
