// H2O's attention mass per cached slot, one layer's: for each sequence that asks for it, KV head g and slot s, the sum
// over the step's tokens of that sequence that see s of the probability its query heads of g gave s (summed over the
// heads in order in fp32, then rounded to fixed point: round(mass 2^24), half away from zero), as 64-bit integers
// (lo, hi) the host adds into the sequence's SlotScores (the CPU's paged_attention does the same sums; integer sums
// do not depend on their order). The probabilities are paged_attention.comp's, left in its scratch
// [tokens][heads][max_slots] for each token's slots [first, visible). One invocation a (sequence, KV head, slot).
#version 450

layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Scratch { float scratch[]; };
layout(std430, binding = 1) readonly buffer Tokens { uvec4 token_info[]; };  // as paged_attention.comp's
// Per sequence asking for mass: where its rows start in `mass` (in pairs), its row stride (slots it holds), and the
// range [begin, end) of token_list holding its tokens.
layout(std430, binding = 2) readonly buffer Sequences { uvec4 sequences[]; };
layout(std430, binding = 3) readonly buffer TokenList { uint token_list[]; };
// [sequence's rows: layer][kv_head][slot] (lo, hi)
layout(std430, binding = 4) writeonly buffer Mass { uvec2 mass[]; };
layout(push_constant) uniform Push {
  uint heads;
  uint kv_heads;
  uint max_slots;
  uint window;  // the layer's, as paged_attention.comp's
  uint layer;
} push;

void main() {
  const uint s = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y / push.kv_heads, g = gl_WorkGroupID.y % push.kv_heads;
  const uvec4 sequence = sequences[i];
  if (s >= sequence.y) return;
  const uint group = push.heads / push.kv_heads;
  uint lo = 0u, hi = 0u;
  for (uint at = sequence.z; at < sequence.w; ++at) {
    const uint t = token_list[at], visible = token_info[t].y, sequence_window = token_info[t].z;
    const uint w = push.window == 0u ? sequence_window
                   : sequence_window == 0u ? push.window
                                           : min(push.window, sequence_window);
    const uint first = w > 0u && visible > w ? visible - w : 0u;
    if (s < first || s >= visible) continue;
    float m = 0.0;
    for (uint h = 0u; h < group; ++h) m += scratch[(t * push.heads + g * group + h) * push.max_slots + s];
    if (m == 0.0) continue;
    // m < 256 (a probability per head, at most 255 heads a group): m 2^24 is exact and below 2^32.
    const float x = m * 16777216.0, whole = floor(x);
    const uint units = uint(whole) + (x - whole >= 0.5 ? 1u : 0u);
    uint carry;
    lo = uaddCarry(lo, units, carry);
    hi += carry;
  }
  mass[sequence.x + (push.layer * push.kv_heads + g) * sequence.y + s] = uvec2(lo, hi);
}
