// The KV write: rows of K (or V) [tokens][kv_heads][width] fp32 stored at each token's slot of one layer's pool,
// laid out as the host's KvStorage ([block][kv_head][slot in block][width]: blocks move between device, host tier and
// disk byte for byte). Specialization constant 1, the element: 0 f32, 1 f16, 2 bf16, rounded to nearest even with
// the bits of core/half.h's fp32_to_fp16 / fp32_to_bf16 (NaNs made quiet). One invocation a value.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kElement = 0;

layout(std430, binding = 0) readonly buffer Rows { float rows[]; };
layout(std430, binding = 1) writeonly buffer PoolF32 { float pool_f32[]; };
layout(std430, binding = 1) writeonly buffer Pool16 { uint16_t pool_16[]; };
layout(std430, binding = 2) readonly buffer Slots { uint slots[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint kv_heads;
  uint width;
  uint block_size;
} push;

uint to_fp16(float f) {
  const uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);  // inf or nan
  if (a >= 0x477ff000u) return sign | 0x7c00u;                                     // overflow to inf
  if (a < 0x38800000u) {                                                           // subnormal or zero
    if (a < 0x33000000u) return sign;
    const uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint h = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  const uint rounded = a + 0xfffu + ((a >> 13) & 1u) - ((127u - 15u) << 23);
  return sign | (rounded >> 13);
}

uint to_bf16(float f) {
  const uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

void main() {
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
