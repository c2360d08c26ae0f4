// out[t][:] = row ids[t] of a table in the file's type, dequantized (the token embedding): exact, as the CPU's
// dequantize_row (F16 widened, Q8_0 d * q with one rounding). Specialization constant 1: 0 F32, 1 F16, 8 Q8_0.
// One invocation a value.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kType = 0;

layout(std430, binding = 0) readonly buffer TF32 { float t_f32[]; };
layout(std430, binding = 0) readonly buffer TF16 { uint16_t t_f16[]; };
layout(std430, binding = 0) readonly buffer TQ8 { int8_t t_q8[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_rows[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint cols;
} push;

void main() {
  const uint id = gl_GlobalInvocationID.x;
  if (id >= push.tokens * push.cols) return;
  const uint t = id / push.cols, c = id % push.cols, row = ids[t];
  float v;
  if (kType == 0) {
    v = t_f32[row * push.cols + c];
  } else if (kType == 1) {
    v = unpackHalf2x16(uint(t_f16[row * push.cols + c])).x;
  } else {
    const uint at = row * (push.cols / 32) * 34 + (c / 32) * 34;
    const float d = unpackHalf2x16(uint(uint8_t(t_q8[at])) | (uint(uint8_t(t_q8[at + 1])) << 8)).x;
    v = d * float(t_q8[at + 2 + c % 32]);
  }
  out_rows[id] = v;
}
