// out[t][:] = row ids[t] of a table [rows][cols] in the file's type, dequantized (the token embedding): the same bits
// as the CPU's dequantize_row. Specialization constant 1: the DType id, any of dequant.glsl's (F32, F16 and BF16
// through typed views, widened exactly; the block types through dequant, cols a whole number of blocks).
// One invocation a value.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kType = 0;

// The table, binding 0, in three views: fp32, 16-bit halves (F16, BF16) and bytes (the blocks, for dequant.glsl).
layout(std430, binding = 0) readonly buffer WF32 { float w_f32[]; };
layout(std430, binding = 0) readonly buffer WU16 { uint16_t w_u16[]; };
layout(std430, binding = 0) readonly buffer WU8 { uint8_t w_u8[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_rows[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint cols;
  uint first_row;  // the table holds rows first_row .. first_row + rows - 1 (a table split over bindings: each part
  uint rows;       // fills the tokens whose ids it holds and leaves the others)
} push;

#include "dequant.glsl"

void main() {
  const uint id = gl_GlobalInvocationID.x;
  if (id >= push.tokens * push.cols) return;
  const uint t = id / push.cols, c = id % push.cols;
  if (ids[t] < push.first_row || ids[t] - push.first_row >= push.rows) return;
  const uint row = ids[t] - push.first_row;
  float v;
  if (kType == kDTypeF32) {
    v = w_f32[row * push.cols + c];
  } else if (kType == kDTypeF16) {
    v = unpackHalf2x16(uint(w_u16[row * push.cols + c])).x;
  } else if (kType == kDTypeBF16) {
    v = as_float_bf16(uint(w_u16[row * push.cols + c]));
  } else {
    const uint blocks = push.cols / kBlockValues;
    v = dequant((row * blocks + c / kBlockValues) * kBlockBytes, c % kBlockValues);
  }
  out_rows[id] = v;
}
