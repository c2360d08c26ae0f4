// y[t][r] = sum_c W[r][c] x[t][c] for the rows of W in the file's type, dequantized in registers: one subgroup a row
// and token, its lanes over the row's columns (block types: whole blocks a lane, acc += value * x over the block),
// summed by subgroupAdd. The CPU twin is tensor/matmul.h's scalar reference (dequantized rows times fp32
// activations); each value is the CPU's dequantized bits (dequant.glsl), only the sums' order differs. Weight type
// (specialization constant 1): the DType id, any of dequant.glsl's: F32, F16, BF16 through typed views, the block
// types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K..Q6_K) through dequant; a row is cols / kBlockValues
// blocks of kBlockBytes. x's row t lies at t x_stride + x_offset (MLA reads one head's part of a row).
//
// Experts (specialization constant 2): W holds experts [first_expert, first_expert + experts) of `rows` rows each,
// stacked; workgroup row y is a (token, choice) whose expert is ids[y] (others skip it: another part of the stack holds
// it), its x row y / x_group (gate and up: the token's, k choices a token; down: its own).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;        // the workgroup size: subgroups of it take one row each
layout(constant_id = 1) const uint kType = 0;
layout(constant_id = 2) const uint kExperts = 0;

// W, binding 0, in three views: fp32, 16-bit halves (F16, BF16) and bytes (the blocks, for dequant.glsl).
layout(std430, binding = 0) readonly buffer WF32 { float w_f32[]; };
layout(std430, binding = 0) readonly buffer WU16 { uint16_t w_u16[]; };
layout(std430, binding = 0) readonly buffer WU8 { uint8_t w_u8[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Ids { uint ids[]; };  // experts: each y row's expert
layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint tokens;
  uint group_rows;  // rows a workgroup takes: the host's workgroup / subgroup size; the loop below covers any other
  uint out_rows;    // y's row of a token: [tokens][out_rows], this W's rows at row_offset of it (a matrix split over
  uint row_offset;  // bindings: each part writes its own rows)
  uint x_stride;
  uint x_offset;
  uint x_group;       // experts: y rows a row of x serves
  uint first_expert;  // experts: the stack's first, and how many it holds
  uint experts;
} push;

#include "dequant.glsl"

// Row `row` of W (`w_row` of the buffer) times x at xb, into y row t, by one subgroup.
void row_dot(uint row, uint w_row, uint xb, uint t) {
  float acc = 0.0;
  if (kType == kDTypeF32) {
    const uint wb = w_row * push.cols;
    for (uint c = gl_SubgroupInvocationID; c < push.cols; c += gl_SubgroupSize) acc += w_f32[wb + c] * x[xb + c];
  } else if (kType == kDTypeF16) {
    const uint wb = w_row * push.cols;
    for (uint c = gl_SubgroupInvocationID; c < push.cols; c += gl_SubgroupSize)
      acc += unpackHalf2x16(uint(w_u16[wb + c])).x * x[xb + c];
  } else if (kType == kDTypeBF16) {
    const uint wb = w_row * push.cols;
    for (uint c = gl_SubgroupInvocationID; c < push.cols; c += gl_SubgroupSize)
      acc += as_float_bf16(uint(w_u16[wb + c])) * x[xb + c];
  } else {
    const uint blocks = push.cols / kBlockValues, wb = w_row * blocks * kBlockBytes;
    for (uint b = gl_SubgroupInvocationID; b < blocks; b += gl_SubgroupSize) {
      const uint at = wb + b * kBlockBytes, xc = xb + b * kBlockValues;
      for (uint i = 0; i < kBlockValues; ++i) acc += dequant(at, i) * x[xc + i];
    }
  }
  acc = subgroupAdd(acc);
  if (subgroupElect()) y[t * push.out_rows + push.row_offset + row] = acc;
}

void main() {
  const uint first = gl_WorkGroupID.x * push.group_rows, end = min(push.rows, first + push.group_rows);
  const uint t = gl_WorkGroupID.y;
  uint base = 0u, x_row = t;
  if (kExperts != 0u) {
    const uint expert = ids[t];
    if (expert < push.first_expert || expert >= push.first_expert + push.experts) return;
    base = (expert - push.first_expert) * push.rows;
    x_row = t / push.x_group;
  }
  const uint xb = x_row * push.x_stride + push.x_offset;
  for (uint row = first + gl_SubgroupID; row < end; row += gl_NumSubgroups) row_dot(row, base + row, xb, t);
}
