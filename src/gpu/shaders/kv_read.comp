// One sequence's cached rows of one KV head read back as fp32, as the CPU reads them (attention/compact_kv.h's
// read_kv_row): out[slot] = the row of `slot` < slots through the sequence's block table (tables[table_offset + b]),
// f32 as stored, f16 and bf16 widened, int8 and int4 per token min + scale q (two roundings, as the CPU's value
// kernel). MLA's expanded form reads the latent rows it up-projects with it. One invocation a value.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kElement = 0;

layout(std430, binding = 0) readonly buffer PoolF32 { float pool_f32[]; };
layout(std430, binding = 0) readonly buffer Pool16 { uint16_t pool_16[]; };
layout(std430, binding = 0) readonly buffer Pool8 { uint8_t pool_8[]; };
layout(std430, binding = 1) readonly buffer Tables { uint tables[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_rows[]; };
layout(push_constant) uniform Push {
  uint slots;
  uint width;
  uint block_size;
  uint kv_heads;
  uint head;
  uint group_size;        // quantized: elements a (scale, min) pair covers
  uint head_block_bytes;  // bytes of one head's rows (and scales) in a block
  uint data_bytes;        // quantized: where a head-block's scales begin
  uint table_offset;
} push;

void main() {
  const uint id = gl_GlobalInvocationID.x;
  if (id >= push.slots * push.width) return;
  const uint slot = id / push.width, i = id % push.width;
  const uint block = tables[push.table_offset + slot / push.block_size], r = slot % push.block_size;
  const uint base = (block * push.kv_heads + push.head) * push.head_block_bytes;
  if (kElement == 0u) {
    out_rows[id] = pool_f32[base / 4u + r * push.width + i];
    return;
  }
  if (kElement < 3u) {
    const uint bits = uint(pool_16[base / 2u + r * push.width + i]);
    out_rows[id] = kElement == 1u ? unpackHalf2x16(bits).x : uintBitsToFloat(bits << 16);
    return;
  }
  const uint groups = push.width / push.group_size, g = i / push.group_size;
  const uint scales = (base + push.data_bytes) / 2u + r * 2u * groups;
  uint q;
  if (kElement == 3u) {
    q = uint(pool_8[base + r * push.width + i]);
  } else {
    const uint c = i / 32u, j = i % 32u, half_n = min(32u, push.width - c * 32u) / 2u;
    const uint byte = uint(pool_8[base + r * (push.width / 2u) + c * 16u + (j < half_n ? j : j - half_n)]);
    q = (j < half_n ? byte : byte >> 4) & 0x0fu;
  }
  precise float product = unpackHalf2x16(uint(pool_16[scales + g])).x * float(q);
  precise float value = product + unpackHalf2x16(uint(pool_16[scales + groups + g])).x;
  out_rows[id] = value;
}
