// Keys quantized per channel (kv/kv_format.h), the groups a step completes: each quantized into its head-block as
// tensor/kv_quant.cpp's quantize_group_per_channel does (per channel the (scale, min) pair of the group's fp16 rows,
// then each row's q), from its rows in fp16: the first `from_tail` from the block's key tail (written by earlier
// steps), the rest from this step's K [tokens][kv_heads][width] fp32, rounded to fp16 as the CPU stages them.
// A seal is 6 words: block, first row of the group in the block, rows, key tail (0xffffffff: none), rows from the
// tail, the batch token of the first row after them. Specialization constant 1: 3 int8, 4 int4. One invocation a
// (seal, KV head, column): int8 a channel, int4 the two channels that share a byte (chunks of 32, channel j and
// j + n/2 of an n-channel chunk), so no byte has two writers.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kElement = 3;

layout(std430, binding = 0) readonly buffer Rows { float rows[]; };
layout(std430, binding = 1) buffer Pool16 { uint16_t pool_16[]; };
layout(std430, binding = 1) buffer Pool8 { uint8_t pool_8[]; };
layout(std430, binding = 2) readonly buffer Tails { uint16_t tails[]; };
layout(std430, binding = 3) readonly buffer Seals { uint seals[]; };
layout(push_constant) uniform Push {
  uint num_seals;
  uint kv_heads;
  uint width;
  uint group_size;
  uint head_block_bytes;
  uint data_bytes;
  uint layer;
  uint num_layers;
} push;

#include "kv_quant.glsl"

// Row r (0..rows-1) of the group, channel c, as the fp16 value the CPU quantizes.
float group_value(uint r, uint c, uint h, uint tail, uint from_tail, uint first_token) {
  if (r < from_tail) {
    const uint head = (tail * push.num_layers + push.layer) * push.kv_heads + h;
    return fp16_value(uint(tails[(head * push.group_size + r) * push.width + c]));
  }
  return fp16_value(to_fp16(rows[((first_token + r - from_tail) * push.kv_heads + h) * push.width + c]));
}

void main() {
  const bool int8 = kElement == 3u;
  const uint columns = int8 ? push.width : push.width / 2u, id = gl_GlobalInvocationID.x;
  if (id >= push.num_seals * push.kv_heads * columns) return;
  const uint e = id / (push.kv_heads * columns), h = id / columns % push.kv_heads, col = id % columns;
  const uint block = seals[6u * e], first_row = seals[6u * e + 1u], n = seals[6u * e + 2u];
  const uint tail = seals[6u * e + 3u], from_tail = seals[6u * e + 4u], first_token = seals[6u * e + 5u];
  const uint base = (block * push.kv_heads + h) * push.head_block_bytes;
  const uint scales = (base + push.data_bytes) / 2u + first_row / push.group_size * 2u * push.width;
  const float levels = int8 ? 255.0 : 15.0;
  // The column's channels: one (int8), or the low and high nibble's (int4).
  const uint chunk = col / 16u, j = col % 16u, half_n = min(32u, push.width - chunk * 32u) / 2u;
  const uint channels = int8 ? 1u : 2u;
  uint q_low[16];  // int4: the low nibbles of the group's rows (at most 16: kv/kv_format.cpp, checked by the host)
  for (uint k = 0u; k < channels; ++k) {
    const uint c = int8 ? col : chunk * 32u + j + k * half_n;
    float lo = group_value(0u, c, h, tail, from_tail, first_token), hi = lo;
    for (uint r = 1u; r < n; ++r) {
      const float x = group_value(r, c, h, tail, from_tail, first_token);
      lo = min(lo, x);
      hi = max(hi, x);
    }
    const uvec2 pair = quant_pair(lo, hi, levels);
    pool_16[scales + c] = uint16_t(pair.x);
    pool_16[scales + push.width + c] = uint16_t(pair.y);
    for (uint r = 0u; r < n; ++r) {
      const uint q = quantize(group_value(r, c, h, tail, from_tail, first_token), pair, levels);
      if (int8) {
        pool_8[base + (first_row + r) * push.width + c] = uint8_t(q);
      } else if (k == 0u) {
        q_low[r] = q;
      } else {
        pool_8[base + (first_row + r) * (push.width / 2u) + chunk * 16u + j] = uint8_t(q_low[r] | (q << 4));
      }
    }
  }
}
