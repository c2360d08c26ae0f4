// Keys quantized per channel (kv/kv_format.h), the rows of a filling group: each value of K [tokens][kv_heads][width]
// fp32 whose token has a tail (tail_of_token[t] != 0xffffffff) stored in fp16 (core/half.h's rounding) as row
// (slot % block_size) % group_size of that key tail, [tail][layer][kv_head][group_size][width] as KvStorage keeps the
// tails; attention reads them in place until key_seal.comp quantizes the group (in a later step, or dispatched
// before this in the same step). One invocation a value.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Rows { float rows[]; };
layout(std430, binding = 1) writeonly buffer Tails { uint16_t tails[]; };
layout(std430, binding = 2) readonly buffer Slots { uint slots[]; };
layout(std430, binding = 3) readonly buffer TailOfToken { uint tail_of_token[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint kv_heads;
  uint width;
  uint block_size;
  uint group_size;
  uint layer;
  uint num_layers;
} push;

#include "kv_quant.glsl"

void main() {
  const uint id = gl_GlobalInvocationID.x, row_width = push.kv_heads * push.width;
  if (id >= push.tokens * row_width) return;
  const uint t = id / row_width, h = id % row_width / push.width, i = id % push.width, tail = tail_of_token[t];
  if (tail == 0xffffffffu) return;
  const uint row = slots[t] % push.block_size % push.group_size;
  const uint head = (tail * push.num_layers + push.layer) * push.kv_heads + h;
  tails[(head * push.group_size + row) * push.width + i] = uint16_t(to_fp16(rows[id]));
}
