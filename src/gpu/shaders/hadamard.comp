// The normalized Hadamard transform in place over `rows` rows of `width` floats (a power of two): rotated keys
// (--kv-rotate-keys) are stored as H k and attended by H q. tensor/kv_quant.cpp's hadamard_transform, bit for bit:
// the same butterflies stage by stage (each a + b and a - b, correctly rounded in Vulkan as on the CPU), then the
// product by the host's fp32 1/sqrt(width). One invocation a row (speed is issue 44's).
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Rows { float x[]; };
layout(push_constant) uniform Push {
  uint rows;
  uint width;
  float norm;
} push;

void main() {
  const uint row = gl_GlobalInvocationID.x;
  if (row >= push.rows) return;
  const uint base = row * push.width;
  for (uint len = 1u; len < push.width; len *= 2u) {
    for (uint i = 0u; i < push.width; i += 2u * len) {
      for (uint j = i; j < i + len; ++j) {
        const float a = x[base + j], b = x[base + j + len];
        precise float sum = a + b, difference = a - b;
        x[base + j] = sum;
        x[base + j + len] = difference;
      }
    }
  }
  for (uint i = 0u; i < push.width; ++i) {
    precise float scaled = x[base + i] * push.norm;
    x[base + i] = scaled;
  }
}
