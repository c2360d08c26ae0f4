// RoPE over `tokens` rows of `heads` heads of `head_dim`, in place, by each token's angles given as tables
// cos[t][i], sin[t][i] for i < half (the CPU's rope_cos_sin; its twin: tensor/ops.h rope_interleaved / rope_neox).
// Specialization constant 1: 0 rotates pairs (2i, 2i + 1) (GGUF llama), 1 pairs (i, i + half) (NeoX: Qwen2, Gemma).
// One invocation a pair.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kNeox = 0;

layout(std430, binding = 0) buffer Heads { float x[]; };
layout(std430, binding = 1) readonly buffer Cos { float cos_t[]; };
layout(std430, binding = 2) readonly buffer Sin { float sin_t[]; };
layout(push_constant) uniform Push {
  uint tokens;
  uint heads;
  uint head_dim;
  uint half_dim;  // rope_dim / 2
  uint offset;    // where a head's rotated part begins (MLA: after its nope part, or the latent's r)
} push;

void main() {
  const uint id = gl_GlobalInvocationID.x, pairs = push.tokens * push.heads * push.half_dim;
  if (id >= pairs) return;
  const uint i = id % push.half_dim, head = id / push.half_dim, t = head / push.heads;
  const uint base = head * push.head_dim + push.offset;
  const uint a = base + (kNeox == 1 ? i : 2 * i), b = base + (kNeox == 1 ? i + push.half_dim : 2 * i + 1);
  const float c = cos_t[t * push.half_dim + i], s = sin_t[t * push.half_dim + i];
  const float x0 = x[a], x1 = x[b];
  x[a] = x0 * c - x1 * s;
  x[b] = x0 * s + x1 * c;
}
