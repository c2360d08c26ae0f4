// Rotary position embedding (interleaved pairs), scalar: it is a small share of a step once cos/sin are
// computed per position instead of per layer.
#include <cmath>

#include "core/status.h"
#include "tensor/ops.h"

namespace kvs {

std::vector<float> rope_inverse_frequencies(size_t rope_dim, float freq_base) {
  std::vector<float> inv_freq(rope_dim / 2);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(freq_base, -static_cast<float>(2 * i) / static_cast<float>(rope_dim));
  return inv_freq;
}

void rope_cos_sin(size_t pos, std::span<const float> inv_freq, std::span<float> cos, std::span<float> sin) {
  KVS_ASSERT(cos.size() >= inv_freq.size() && sin.size() >= inv_freq.size(),
             "rope_cos_sin: {} frequencies, cos has {}, sin {}", inv_freq.size(), cos.size(), sin.size());
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

namespace {

// Rotates pairs (v[i * step], v[i * step + partner]) of each head by (cos[i], sin[i]): the interleaved layout is
// step 2, partner 1; NeoX is step 1, partner cos.size().
void rotate_pairs(std::span<float> heads, size_t n_heads, size_t head_dim, std::span<const float> cos,
                  std::span<const float> sin, size_t step, size_t partner) {
  const size_t pairs = cos.size();
  KVS_ASSERT(sin.size() == pairs && 2 * pairs <= head_dim && heads.size() >= n_heads * head_dim,
             "rope: {} cos / {} sin values, head_dim {}, {} heads in {} floats", pairs, sin.size(), head_dim, n_heads,
             heads.size());
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = heads.data() + h * head_dim;
    for (size_t i = 0; i < pairs; ++i) {
      float& a = v[i * step];
      float& b = v[i * step + partner];
      const float v0 = a, v1 = b;
      a = v0 * cos[i] - v1 * sin[i];
      b = v0 * sin[i] + v1 * cos[i];
    }
  }
}

}  // namespace

void rope_interleaved(std::span<float> heads, size_t n_heads, size_t head_dim, std::span<const float> cos,
                      std::span<const float> sin) {
  rotate_pairs(heads, n_heads, head_dim, cos, sin, 2, 1);
}

void rope_neox(std::span<float> heads, size_t n_heads, size_t head_dim, std::span<const float> cos,
               std::span<const float> sin) {
  rotate_pairs(heads, n_heads, head_dim, cos, sin, 1, cos.size());
}

void rope_interleaved(std::span<float> heads, size_t n_heads, size_t head_dim, size_t rope_dim, size_t pos,
                      float freq_base) {
  const std::vector<float> inv_freq = rope_inverse_frequencies(rope_dim, freq_base);
  std::vector<float> cos(inv_freq.size()), sin(inv_freq.size());
  rope_cos_sin(pos, inv_freq, cos, sin);
  rope_interleaved(heads, n_heads, head_dim, cos, sin);
}

}  // namespace kvs
