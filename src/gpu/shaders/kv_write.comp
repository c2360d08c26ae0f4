// The KV write: rows of K (or V) [tokens][kv_heads][width] fp32 stored at each token's slot of one layer's pool,
// laid out as the host's KvStorage (kv/kv_format.h: [block][kv_head] head-blocks of [slot in block][width] elements,
// then for the quantized types their fp16 scales and mins: blocks move between device, host tier and disk byte for
// byte). Specialization constant 1, the element: 0 f32, 1 f16, 2 bf16, rounded to nearest even with the bits of
// core/half.h's fp32_to_fp16 / fp32_to_bf16 (NaNs made quiet), one invocation a value; 3 int8, 4 int4, quantized per
// token as tensor/kv_quant.cpp's quantize_row_per_token does (the same pair of each group of group_size elements,
// the same q), one invocation a group.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kElement = 0;

layout(std430, binding = 0) readonly buffer Rows { float rows[]; };
layout(std430, binding = 1) writeonly buffer PoolF32 { float pool_f32[]; };
layout(std430, binding = 1) writeonly buffer Pool16 { uint16_t pool_16[]; };
layout(std430, binding = 1) writeonly buffer Pool8 { uint8_t pool_8[]; };
layout(std430, binding = 2) readonly buffer Slots { uint slots[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint kv_heads;
  uint width;
  uint block_size;
  uint group_size;        // quantized: elements of a row sharing a (scale, min) pair
  uint head_block_bytes;  // quantized: bytes of one head's rows and scales in a block
  uint data_bytes;        // quantized: bytes of a head-block's rows (padded to 4), where its scales begin
} push;

#include "kv_quant.glsl"

// One (token, KV head, group) of a quantized pool: the group's pair into the row's scales, its q into the row (int4:
// chunks of 32 elements, element j and j + n/2 of an n-element chunk in one byte, low then high nibble; a group is
// whole chunks or the whole row, so no byte is shared with another invocation).
void write_quantized() {
  const uint groups = push.width / push.group_size, id = gl_GlobalInvocationID.x;
  if (id >= push.tokens * push.kv_heads * groups) return;
  const uint t = id / (push.kv_heads * groups), h = id / groups % push.kv_heads, g = id % groups;
  const uint slot = slots[t], block = slot / push.block_size, in_block = slot % push.block_size;
  const uint base = (block * push.kv_heads + h) * push.head_block_bytes;
  const uint row = (t * push.kv_heads + h) * push.width, first = g * push.group_size;
  float lo = rows[row + first], hi = lo;
  for (uint i = 1u; i < push.group_size; ++i) {
    lo = min(lo, rows[row + first + i]);
    hi = max(hi, rows[row + first + i]);
  }
  const float levels = kElement == 3u ? 255.0 : 15.0;
  const uvec2 pair = quant_pair(lo, hi, levels);
  const uint scales = (base + push.data_bytes) / 2u + in_block * 2u * groups;  // this row's set, in fp16 words
  pool_16[scales + g] = uint16_t(pair.x);
  pool_16[scales + groups + g] = uint16_t(pair.y);
  if (kElement == 3u) {
    const uint at = base + in_block * push.width + first;
    for (uint i = 0u; i < push.group_size; ++i) pool_8[at + i] = uint8_t(quantize(rows[row + first + i], pair, levels));
    return;
  }
  const uint at = base + in_block * (push.width / 2u);
  for (uint c = first / 32u; c * 32u < first + push.group_size; ++c) {
    const uint n = min(32u, push.width - c * 32u), half_n = n / 2u;
    for (uint j = 0u; j < half_n; ++j) {
      const uint low = quantize(rows[row + c * 32u + j], pair, levels);
      const uint high = quantize(rows[row + c * 32u + j + half_n], pair, levels);
      pool_8[at + c * 16u + j] = uint8_t(low | (high << 4));
    }
  }
}

void main() {
  if (kElement >= 3u) {
    write_quantized();
    return;
  }
  const uint id = gl_GlobalInvocationID.x, row_width = push.kv_heads * push.width;
  if (id >= push.tokens * row_width) return;
  const uint t = id / row_width, h = (id % row_width) / push.width, i = id % push.width;
  const uint slot = slots[t], block = slot / push.block_size, in_block = slot % push.block_size;
  const uint at = ((block * push.kv_heads + h) * push.block_size + in_block) * push.width + i;
  const float v = rows[id];
  if (kElement == 0) {
    pool_f32[at] = v;
  } else {
    pool_16[at] = uint16_t(kElement == 1 ? to_fp16(v) : to_bf16(v));
  }
}
