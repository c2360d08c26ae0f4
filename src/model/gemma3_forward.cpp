#include "model/gemma3_forward.h"

#include <cmath>

#include "tensor/ops.h"

namespace kvs {

Gemma3Forward::Gemma3Forward(const DecoderModel& model, ThreadPool& pool)
    : DecoderForward(model.config(), model.weights(), pool) {
  const ModelConfig& c = config_;
  local_.inv_freq = c.rope_frequencies(true);
  global_.inv_freq = c.rope_frequencies();
  if (c.attention_scale > 0.0f) query_scale_ = c.attention_scale * std::sqrt(static_cast<float>(c.head_dim));
}

void Gemma3Forward::forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) {
  const ModelConfig& c = config_;
  const size_t n = begin(batch, kv, logits);
  if (n == 0) return;
  rope_tables(batch.positions, local_);
  rope_tables(batch.positions, global_);
  const size_t hd = c.head_dim;

  for (size_t l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& w = weights_.layers[l];
    const Rope& rope = c.window_of(l) > 0 ? local_ : global_;  // the model's window, whatever the KV layout
    // Attention block: xb = norm(x); q,k,v = xb W; norm each q and k head; rope; store k,v; attend;
    // x += norm(att Wo).
    rmsnorm_rows(xb_, x_, w.attn_norm, n);
    project(xb_, n, {{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}});
    for_tokens(n, [&](size_t t) {
      float* q = &q_[t * c.q_dim()];
      float* k = &k_[t * c.kv_dim()];
      for (size_t h = 0; h < c.num_heads; ++h) rmsnorm({q + h * hd, hd}, {q + h * hd, hd}, w.q_norm, c.rms_eps);
      for (size_t h = 0; h < c.num_kv_heads; ++h) rmsnorm({k + h * hd, hd}, {k + h * hd, hd}, w.k_norm, c.rms_eps);
      rotate({q, c.q_dim()}, c.num_heads, rope, t);
      rotate({k, c.kv_dim()}, c.num_kv_heads, rope, t);
      if (query_scale_ != 1.0f)
        for (size_t i = 0; i < c.q_dim(); ++i) q[i] *= query_scale_;
    });
    store_kv(batch, kv, l);
    attend(batch, kv, l);
    matmul(w.wo, att_, n, proj_, pool_, scratch_);
    rmsnorm_rows(proj_, proj_, w.post_attention_norm, n);
    add_to_residual(proj_, n);

    // Feed-forward block: x += norm(W_down (gelu(xb W_gate) * xb W_up)).
    rmsnorm_rows(xb_, x_, w.ffn_norm, n);
    project(xb_, n, {{&w.w_gate, gate_.data()}, {&w.w_up, up_.data()}});
    gate_activation(n, [](std::span<float> gate, std::span<const float> up) { geglu(gate, up); });
    matmul(w.w_down, gate_, n, proj_, pool_, scratch_);
    rmsnorm_rows(proj_, proj_, w.post_ffw_norm, n);
    add_to_residual(proj_, n);
  }
  compute_logits(batch, logits);
}

}  // namespace kvs
