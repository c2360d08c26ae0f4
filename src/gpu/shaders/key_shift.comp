// The keys a compaction moves (attention/compact_kv.h), re-rotated to their new slots on the device, as the CPU's
// compact_kv does it: each staged row (the source row's bytes and, for int8/int4, its per-token (scale, min) set,
// gathered by copies before any row is written, so moves within a sequence never read a row already overwritten) is
// read as fp32 as the CPU reads it back (read_kv_row: min + scale q, two roundings), taken out of its Hadamard form
// when stored rotated (H is its own inverse), turned by RoPE over its distance (the host's cos and sin of the distance,
// sin negated: the key moves back), put back in Hadamard form, and stored at its new slot in its element (f32; f16 and
// bf16 rounded to nearest even; int8 and int4 quantized per token as kv_write.comp does). Each rounding is the CPU's:
// the rotation's products are not fused, the transform is hadamard.comp's butterflies. One invocation a moved key
// (a compaction moves each kept key at most once every evict_unit tokens).
//
// Specialization constants: 1 the element (0 f32, 1 f16, 2 bf16, 3 int8, 4 int4), 2 NeoX pairs (i, i + half) or
// interleaved (2i, 2i + 1), 3 keys stored rotated (H k).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kElement = 0;
layout(constant_id = 2) const uint kNeox = 0;
layout(constant_id = 3) const uint kRotated = 0;

const uint kMaxWidth = 512;

// [move] the source row's bytes, then (quantized) its scales at a 4-byte boundary: `staged_stride` bytes a move, move
// m at first_move + m.
layout(std430, binding = 0) readonly buffer StagedF32 { float staged_f32[]; };
layout(std430, binding = 0) readonly buffer Staged16 { uint16_t staged_16[]; };
layout(std430, binding = 0) readonly buffer Staged8 { uint8_t staged_8[]; };
// One layer's key pool, the host's layout (kv_write.comp).
layout(std430, binding = 1) writeonly buffer PoolF32 { float pool_f32[]; };
layout(std430, binding = 1) writeonly buffer Pool16 { uint16_t pool_16[]; };
layout(std430, binding = 1) writeonly buffer Pool8 { uint8_t pool_8[]; };
// [move] destination block, KV head, slot in block, distance (old slot - new slot).
layout(std430, binding = 2) readonly buffer Moves { uvec4 moves[]; };
// [distance][2][half]: cos, then sin, of the distance's angles (the host's rope_cos_sin), sin to be negated.
layout(std430, binding = 3) readonly buffer Angles { float angles[]; };
layout(push_constant) uniform Push {
  uint moves;
  uint width;
  uint half_dim;  // RoPE pairs a head
  uint kv_heads;
  uint block_size;
  uint group_size;        // quantized: elements a (scale, min) pair covers
  uint head_block_bytes;  // bytes of one head's rows (and scales) in a block
  uint data_bytes;        // quantized: where a head-block's scales begin
  uint staged_stride;     // bytes a staged move
  uint pair_offset;       // bytes from a staged row to its scales
  uint first_move;        // the staged index of moves[0]
  float norm;             // the host's fp32 1 / sqrt(width)
} push;

#include "kv_quant.glsl"

float x[kMaxWidth];

float widen(uint16_t bits) { return kElement == 1 ? unpackHalf2x16(uint(bits)).x : uintBitsToFloat(uint(bits) << 16); }

// Element i of the staged row at byte `base` (quantized: int4 in chunks of 32, element j and j + n/2 of an n-element
// chunk in one byte).
float staged_element(uint base, uint i) {
  if (kElement == 0u) return staged_f32[base / 4u + i];
  if (kElement < 3u) return widen(staged_16[base / 2u + i]);
  const uint groups = push.width / push.group_size, g = i / push.group_size;
  const uint pairs = (base + push.pair_offset) / 2u;
  uint q;
  if (kElement == 3u) {
    q = uint(staged_8[base + i]);
  } else {
    const uint c = i / 32u, j = i % 32u, half_n = min(32u, push.width - c * 32u) / 2u;
    const uint byte = uint(staged_8[base + c * 16u + (j < half_n ? j : j - half_n)]);
    q = (j < half_n ? byte : byte >> 4) & 0x0fu;
  }
  precise float product = unpackHalf2x16(uint(staged_16[pairs + g])).x * float(q);
  precise float value = product + unpackHalf2x16(uint(staged_16[pairs + groups + g])).x;
  return value;
}

// x = H x over the row (hadamard.comp's butterflies, then the product by norm).
void hadamard() {
  for (uint len = 1u; len < push.width; len *= 2u) {
    for (uint i = 0u; i < push.width; i += 2u * len) {
      for (uint j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        precise float sum = a + b, difference = a - b;
        x[j] = sum;
        x[j + len] = difference;
      }
    }
  }
  for (uint i = 0u; i < push.width; ++i) {
    precise float scaled = x[i] * push.norm;
    x[i] = scaled;
  }
}

// The row into the pool at `base` (its head-block's first byte) as its element, row `r` of the head-block.
void store(uint base, uint r) {
  if (kElement == 0u) {
    for (uint i = 0u; i < push.width; ++i) pool_f32[base / 4u + r * push.width + i] = x[i];
    return;
  }
  if (kElement < 3u) {
    for (uint i = 0u; i < push.width; ++i)
      pool_16[base / 2u + r * push.width + i] = uint16_t(kElement == 1u ? to_fp16(x[i]) : to_bf16(x[i]));
    return;
  }
  const uint groups = push.width / push.group_size;
  const float levels = kElement == 3u ? 255.0 : 15.0;
  const uint scales = (base + push.data_bytes) / 2u + r * 2u * groups;
  for (uint g = 0u; g < groups; ++g) {
    const uint first = g * push.group_size;
    float lo = x[first], hi = lo;
    for (uint i = 1u; i < push.group_size; ++i) {
      lo = min(lo, x[first + i]);
      hi = max(hi, x[first + i]);
    }
    const uvec2 pair = quant_pair(lo, hi, levels);
    pool_16[scales + g] = uint16_t(pair.x);
    pool_16[scales + groups + g] = uint16_t(pair.y);
    if (kElement == 3u) {
      for (uint i = 0u; i < push.group_size; ++i)
        pool_8[base + r * push.width + first + i] = uint8_t(quantize(x[first + i], pair, levels));
      continue;
    }
    const uint at = base + r * (push.width / 2u);
    for (uint c = first / 32u; c * 32u < first + push.group_size; ++c) {
      const uint n = min(32u, push.width - c * 32u), half_n = n / 2u;
      for (uint j = 0u; j < half_n; ++j) {
        const uint low = quantize(x[c * 32u + j], pair, levels);
        const uint high = quantize(x[c * 32u + j + half_n], pair, levels);
        pool_8[at + c * 16u + j] = uint8_t(low | (high << 4));
      }
    }
  }
}

void main() {
  const uint m = gl_GlobalInvocationID.x;
  if (m >= push.moves) return;
  const uvec4 move = moves[m];
  const uint base = (push.first_move + m) * push.staged_stride;
  for (uint i = 0u; i < push.width; ++i) x[i] = staged_element(base, i);
  if (kRotated != 0u) hadamard();
  const uint angle = move.w * 2u * push.half_dim;
  for (uint i = 0u; i < push.half_dim; ++i) {
    const uint a = kNeox != 0u ? i : 2u * i, b = kNeox != 0u ? i + push.half_dim : 2u * i + 1u;
    const float c = angles[angle + i], s = -angles[angle + push.half_dim + i];
    const float v0 = x[a], v1 = x[b];
    precise float p0 = v0 * c, p1 = v1 * s, p2 = v0 * s, p3 = v1 * c;
    precise float r0 = p0 - p1, r1 = p2 + p3;
    x[a] = r0;
    x[b] = r1;
  }
  if (kRotated != 0u) hadamard();
  store((move.x * push.kv_heads + move.y) * push.head_block_bytes, move.z);
}
