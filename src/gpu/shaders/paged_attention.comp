// Paged attention, the reference form (speed is a later issue's): one workgroup a (token, query head) over the
// token's visible slots of its sequence (the last `window` of them under a sliding window), read through the block table (the host's SequenceAttention contract: a
// hole, 0xffffffff, is skipped; slots past `visible` are not read). Scores, then the softmax, then the values, each
// a pass over the slots with the workgroup's lanes side by side; scores go through `scratch` [tokens][heads][max
// slots], which holds each token's probabilities over its slots [first, visible) afterwards (slot_mass.comp). K and V in the pool layout of kv_write.comp, each in its element (specialization constants 1 and 2:
// 0 f32, 1 f16, 2 bf16, 3 int8, 4 int4 per token: read in place, min + scale * q as tensor/kv_quant.cpp's
// kv_element). Keys quantized per channel (specialization constant 3): a (scale, min) pair per channel and group of
// k_group rows, and a sequence's filling group read in fp16 from its key tail (seq_tails: per sequence the tail,
// 0xffffffff for none, and the first slot it holds; tails [tail][layer][kv_head][k_group][head_dim] as
// key_tail_write.comp stores them). GQA: query head h reads KV head h / (heads / kv_heads).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x_id = 0) in;  // <= 512
layout(constant_id = 1) const uint kKey = 0;
layout(constant_id = 2) const uint kValue = 0;
layout(constant_id = 3) const uint kKeyPerChannel = 0;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KF32 { float k_f32[]; };
layout(std430, binding = 1) readonly buffer K16 { uint16_t k_16[]; };
layout(std430, binding = 1) readonly buffer K8 { uint8_t k_8[]; };
layout(std430, binding = 2) readonly buffer VF32 { float v_f32[]; };
layout(std430, binding = 2) readonly buffer V16 { uint16_t v_16[]; };
layout(std430, binding = 2) readonly buffer V8 { uint8_t v_8[]; };
layout(std430, binding = 3) readonly buffer Tables { uint tables[]; };  // [sequence][max_blocks]
// Per token: its sequence, its visible slots, its sequence's own window (0: none), unused.
layout(std430, binding = 4) readonly buffer Tokens { uvec4 token_info[]; };
layout(std430, binding = 5) coherent buffer Scratch { float scratch[]; };
layout(std430, binding = 6) writeonly buffer Out { float out_rows[]; };
layout(std430, binding = 7) readonly buffer SeqTails { uvec2 seq_tails[]; };  // [sequence] (tail, first slot)
layout(std430, binding = 8) readonly buffer Tails { uint16_t tails[]; };
layout(push_constant) uniform Push {
  uint heads;
  uint kv_heads;
  uint head_dim;
  uint value_width;
  uint block_size;
  uint max_blocks;
  uint max_slots;
  float scale;
  // Quantized K and V (per token): elements a (scale, min) pair covers, bytes of a head-block, bytes of its rows.
  uint k_group, k_head_block_bytes, k_data_bytes;
  uint v_group, v_head_block_bytes, v_data_bytes;
  uint layer, num_layers;  // of the key tails
  uint window;             // the layer's sliding window, 0: none
  uint value_row_width;    // elements of a stored value row (MLA: the latent's r + rope, of which value_width are read)
  uint first_token;        // the dispatch's tokens are first_token.. of q, token_info and out
} push;

const uint kHole = 0xffffffffu;
shared float partials[64];

float widen(uint16_t bits, uint element) {
  return element == 1 ? unpackHalf2x16(uint(bits)).x : uintBitsToFloat(uint(bits) << 16);
}

// Where element i of row r of a quantized head-block starting at byte `base` lies: its byte and nibble shift
// (int4: chunks of 32, element j and j + n/2 of an n-element chunk in one byte), and its scale's fp16 word (the min's
// is `groups` further on).
struct QuantizedAt {
  uint byte, shift, scale;
};
// per_channel: the scale of channel i of row r's group of `group` rows.
QuantizedAt quantized_at(uint element, uint base, uint data_bytes, uint width, uint group, uint r, uint i,
                         bool per_channel) {
  const uint groups = width / group;
  const uint scale = (base + data_bytes) / 2u + (per_channel ? r / group * 2u * width + i : r * 2u * groups + i / group);
  if (element == 3u) return QuantizedAt(base + r * width + i, 0u, scale);
  const uint c = i / 32u, j = i % 32u, half_n = min(32u, width - c * 32u) / 2u;
  return QuantizedAt(base + r * (width / 2u) + c * 16u + (j < half_n ? j : j - half_n), j < half_n ? 0u : 4u, scale);
}

// Element i of row r (slot in block) of KV head g in block `block`.
float key_at(uint block, uint g, uint r, uint i) {
  if (kKey < 3u) {
    const uint at = ((block * push.kv_heads + g) * push.block_size + r) * push.head_dim + i;
    return kKey == 0u ? k_f32[at] : widen(k_16[at], kKey);
  }
  const QuantizedAt a = quantized_at(kKey, (block * push.kv_heads + g) * push.k_head_block_bytes, push.k_data_bytes,
                                     push.head_dim, push.k_group, r, i, kKeyPerChannel != 0u);
  const uint q = (uint(k_8[a.byte]) >> a.shift) & (kKey == 3u ? 0xffu : 0x0fu);
  const uint set = kKeyPerChannel != 0u ? push.head_dim : push.head_dim / push.k_group;  // scales, then as many mins
  return unpackHalf2x16(uint(k_16[a.scale + set])).x + unpackHalf2x16(uint(k_16[a.scale])).x * float(q);
}
float value_at(uint block, uint g, uint r, uint i) {
  if (kValue < 3u) {
    const uint at = ((block * push.kv_heads + g) * push.block_size + r) * push.value_row_width + i;
    return kValue == 0u ? v_f32[at] : widen(v_16[at], kValue);
  }
  const QuantizedAt a = quantized_at(kValue, (block * push.kv_heads + g) * push.v_head_block_bytes,
                                     push.v_data_bytes, push.value_row_width, push.v_group, r, i, false);
  const uint q = (uint(v_8[a.byte]) >> a.shift) & (kValue == 3u ? 0xffu : 0x0fu);
  return unpackHalf2x16(uint(v_16[a.scale + push.value_row_width / push.v_group])).x +
         unpackHalf2x16(uint(v_16[a.scale])).x * float(q);
}

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
  const uint head = gl_WorkGroupID.x, t = push.first_token + gl_WorkGroupID.y, lane = gl_LocalInvocationID.x;
  const uint g = head / (push.heads / push.kv_heads), seq = token_info[t].x, visible = token_info[t].y;
  // A window: the token sees its last w visible slots only, w the narrower of the layer's and its sequence's window
  // (BatchAttention's first_slot); the slots before them are not read (their blocks may be gone: holes).
  const uint sequence_window = token_info[t].z;
  const uint w = push.window == 0u ? sequence_window
                 : sequence_window == 0u ? push.window
                                         : min(push.window, sequence_window);
  const uint first = w > 0u && visible > w ? visible - w : 0u;
  const uint qb = (t * push.heads + head) * push.head_dim, sb = (t * push.heads + head) * push.max_slots;
  // Slot s's row of KV head g (of width w) in the pool, or kHole.
  const float minus_inf = -1.0 / 0.0;
  // Keys per channel: slots from tail_first on are the filling group's, in its key tail.
  const uint tail = kKeyPerChannel != 0u ? seq_tails[seq].x : 0xffffffffu;
  const uint tail_first = kKeyPerChannel != 0u ? seq_tails[seq].y : 0u;
  const uint tail_rows = ((tail * push.num_layers + push.layer) * push.kv_heads + g) * push.k_group;
  float top = minus_inf;
  for (uint s = first + lane; s < visible; s += gl_WorkGroupSize.x) {
    const uint block = tables[seq * push.max_blocks + s / push.block_size];
    float score = minus_inf;
    if (tail != 0xffffffffu && s >= tail_first) {
      const uint row = (tail_rows + s - tail_first) * push.head_dim;
      float dot = 0.0;
      for (uint i = 0; i < push.head_dim; ++i) dot += q[qb + i] * unpackHalf2x16(uint(tails[row + i])).x;
      score = push.scale * dot;
    } else if (block != kHole) {
      float dot = 0.0;
      for (uint i = 0; i < push.head_dim; ++i) dot += q[qb + i] * key_at(block, g, s % push.block_size, i);
      score = push.scale * dot;
    }
    scratch[sb + s] = score;
    top = max(top, score);
  }
  top = workgroup_reduce(top, true);
  float sum = 0.0;
  for (uint s = first + lane; s < visible; s += gl_WorkGroupSize.x) {
    const float p = exp(scratch[sb + s] - top);  // a hole's -inf gives 0
    scratch[sb + s] = p;
    sum += p;
  }
  sum = workgroup_reduce(sum, false);
  // The probabilities, p / sum as the CPU's softmax forms them (times the fp32 1 / sum): what the values are weighed
  // by, and what slot_mass.comp sums for H2O.
  const float inverse = 1.0 / sum;
  for (uint s = first + lane; s < visible; s += gl_WorkGroupSize.x) scratch[sb + s] *= inverse;
  memoryBarrierBuffer();
  barrier();
  const uint ob = (t * push.heads + head) * push.value_width;
  for (uint d = lane; d < push.value_width; d += gl_WorkGroupSize.x) {
    float acc = 0.0;
    for (uint s = first; s < visible; ++s) {
      const float p = scratch[sb + s];
      if (p == 0.0) continue;  // a hole (never read) or a probability that underflowed
      const uint block = tables[seq * push.max_blocks + s / push.block_size];
      acc += p * value_at(block, g, s % push.block_size, d);
    }
    out_rows[ob + d] = acc;
  }
}
