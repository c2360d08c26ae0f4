// Paged attention, the reference form (speed is a later issue's): one workgroup a (token, query head) over the
// token's visible slots of its sequence, read through the block table (the host's SequenceAttention contract: a
// hole, 0xffffffff, is skipped; slots past `visible` are not read). Scores, then the softmax, then the values, each
// a pass over the slots with the workgroup's lanes side by side; scores go through `scratch` [tokens][heads][max
// slots]. K and V in the pool layout of kv_write.comp, each in its element (specialization constants 1 and 2:
// 0 f32, 1 f16, 2 bf16). GQA: query head h reads KV head h / (heads / kv_heads).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;  // <= 512
layout(constant_id = 1) const uint kKey = 0;
layout(constant_id = 2) const uint kValue = 0;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KF32 { float k_f32[]; };
layout(std430, binding = 1) readonly buffer K16 { uint16_t k_16[]; };
layout(std430, binding = 2) readonly buffer VF32 { float v_f32[]; };
layout(std430, binding = 2) readonly buffer V16 { uint16_t v_16[]; };
layout(std430, binding = 3) readonly buffer Tables { uint tables[]; };  // [sequence][max_blocks]
layout(std430, binding = 4) readonly buffer Tokens { uvec2 token_info[]; };  // (sequence, visible slots)
layout(std430, binding = 5) coherent buffer Scratch { float scratch[]; };
layout(std430, binding = 6) writeonly buffer Out { float out_rows[]; };
layout(push_constant) uniform Push {
  uint heads;
  uint kv_heads;
  uint head_dim;
  uint value_width;
  uint block_size;
  uint max_blocks;
  uint max_slots;
  float scale;
} push;

const uint kHole = 0xffffffffu;
shared float partials[64];

float widen(uint16_t bits, uint element) {
  return element == 1 ? unpackHalf2x16(uint(bits)).x : uintBitsToFloat(uint(bits) << 16);
}

float key_at(uint at) { return kKey == 0 ? k_f32[at] : widen(k_16[at], kKey); }
float value_at(uint at) { return kValue == 0 ? v_f32[at] : widen(v_16[at], kValue); }

// The workgroup's max (is_max) or sum of one value per invocation.
float workgroup_reduce(float x, bool is_max) {
  x = is_max ? subgroupMax(x) : subgroupAdd(x);
  if (subgroupElect()) partials[gl_SubgroupID] = x;
  barrier();
  float r = is_max ? -1.0 / 0.0 : 0.0;
  for (uint s = 0; s < gl_NumSubgroups; ++s) r = is_max ? max(r, partials[s]) : r + partials[s];
  barrier();
  return r;
}

void main() {
  const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lane = gl_LocalInvocationID.x;
  const uint g = head / (push.heads / push.kv_heads), seq = token_info[t].x, visible = token_info[t].y;
  const uint qb = (t * push.heads + head) * push.head_dim, sb = (t * push.heads + head) * push.max_slots;
  // Slot s's row of KV head g (of width w) in the pool, or kHole.
  const float minus_inf = -1.0 / 0.0;
  float top = minus_inf;
  for (uint s = lane; s < visible; s += gl_WorkGroupSize.x) {
    const uint block = tables[seq * push.max_blocks + s / push.block_size];
    float score = minus_inf;
    if (block != kHole) {
      const uint kb = ((block * push.kv_heads + g) * push.block_size + s % push.block_size) * push.head_dim;
      float dot = 0.0;
      for (uint i = 0; i < push.head_dim; ++i) dot += q[qb + i] * key_at(kb + i);
      score = push.scale * dot;
    }
    scratch[sb + s] = score;
    top = max(top, score);
  }
  top = workgroup_reduce(top, true);
  float sum = 0.0;
  for (uint s = lane; s < visible; s += gl_WorkGroupSize.x) {
    const float p = exp(scratch[sb + s] - top);  // a hole's -inf gives 0
    scratch[sb + s] = p;
    sum += p;
  }
  sum = workgroup_reduce(sum, false);
  memoryBarrierBuffer();
  barrier();
  const uint ob = (t * push.heads + head) * push.value_width;
  for (uint d = lane; d < push.value_width; d += gl_WorkGroupSize.x) {
    float acc = 0.0;
    for (uint s = 0; s < visible; ++s) {
      const float p = scratch[sb + s];
      if (p == 0.0) continue;  // a hole (never read) or a probability that underflowed
      const uint block = tables[seq * push.max_blocks + s / push.block_size];
      acc += p * value_at(((block * push.kv_heads + g) * push.block_size + s % push.block_size) * push.value_width + d);
    }
    out_rows[ob + d] = acc / sum;
  }
}
