// A strided copy of float rows: for each token t < tokens and head h < heads, `width` floats from src at
// t src_stride + h src_head_stride + src_offset to dst at t dst_stride + h dst_head_stride + dst_offset. MLA builds its
// absorbed queries from parts of the query heads with it. Exact. One invocation a value.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint heads;
  uint width;
  uint src_stride;
  uint src_head_stride;
  uint src_offset;
  uint dst_stride;
  uint dst_head_stride;
  uint dst_offset;
} push;

void main() {
  const uint id = gl_GlobalInvocationID.x;
  if (id >= push.tokens * push.heads * push.width) return;
  const uint i = id % push.width, h = id / push.width % push.heads, t = id / (push.width * push.heads);
  dst[t * push.dst_stride + h * push.dst_head_stride + push.dst_offset + i] =
      src[t * push.src_stride + h * push.src_head_stride + push.src_offset + i];
}
