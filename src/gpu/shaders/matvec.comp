// y[t][r] = sum_c W[r][c] x[t][c] for the rows of W in the file's type, dequantized in registers: one subgroup a row
// and token, its lanes over the row's columns (Q8_0: a 32-value block a lane), summed by subgroupAdd. The CPU twin is
// tensor/matmul.h's scalar reference (dequantized rows times fp32 activations). Weight types (specialization
// constant 1): 0 F32, 1 F16, 8 Q8_0 (ggml's block: an fp16 scale, then 32 int8 values; 34 bytes).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;        // the workgroup size: subgroups of it take one row each
layout(constant_id = 1) const uint kType = 0;

layout(std430, binding = 0) readonly buffer WF32 { float w_f32[]; };
layout(std430, binding = 0) readonly buffer WF16 { uint16_t w_f16[]; };
layout(std430, binding = 0) readonly buffer WQ8 { int8_t w_q8[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint tokens;
  uint group_rows;  // rows a workgroup takes: the host's workgroup / subgroup size; the loop below covers any other
} push;

float half_at(uint byte) {  // the fp16 at a byte offset of a Q8_0 row (2-byte aligned: blocks are 34 bytes)
  return unpackHalf2x16(uint(uint8_t(w_q8[byte])) | (uint(uint8_t(w_q8[byte + 1])) << 8)).x;
}

// Row `row` of token t's output, by one subgroup.
void row_dot(uint row, uint t) {
  const uint xb = t * push.cols;
  float acc = 0.0;
  if (kType == 0) {
    const uint wb = row * push.cols;
    for (uint c = gl_SubgroupInvocationID; c < push.cols; c += gl_SubgroupSize) acc += w_f32[wb + c] * x[xb + c];
  } else if (kType == 1) {
    const uint wb = row * push.cols;
    for (uint c = gl_SubgroupInvocationID; c < push.cols; c += gl_SubgroupSize)
      acc += unpackHalf2x16(uint(w_f16[wb + c])).x * x[xb + c];
  } else {
    const uint blocks = push.cols / 32, wb = row * blocks * 34;
    for (uint b = gl_SubgroupInvocationID; b < blocks; b += gl_SubgroupSize) {
      const uint at = wb + b * 34;
      float dot = 0.0;
      for (uint i = 0; i < 32; ++i) dot += float(w_q8[at + 2 + i]) * x[xb + b * 32 + i];
      acc += half_at(at) * dot;
    }
  }
  acc = subgroupAdd(acc);
  if (subgroupElect()) y[t * push.rows + row] = acc;
}

void main() {
  const uint first = gl_WorkGroupID.x * push.group_rows, end = min(push.rows, first + push.group_rows);
  for (uint row = first + gl_SubgroupID; row < end; row += gl_NumSubgroups) row_dot(row, gl_WorkGroupID.y);
}
