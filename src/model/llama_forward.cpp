#include "model/llama_forward.h"

#include "tensor/ops.h"

namespace kvs {
namespace {

void add_bias(std::span<float> y, std::span<const float> bias) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += bias[i];
}

}  // namespace

LlamaForward::LlamaForward(const DecoderModel& model, ThreadPool& pool)
    : DecoderForward(model.shard_config(), model.weights(), pool, model.communicator()),
      rope_{.inv_freq = config_.rope_frequencies(), .cos = {}, .sin = {}} {}

void LlamaForward::forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) {
  const ModelConfig& c = config_;
  const size_t n = begin(batch, kv, logits);
  if (n == 0) return;
  // RoPE angles depend only on the position: once per token for every layer, Q and K.
  rope_tables(batch.positions, rope_);

  for (size_t l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& w = weights_.layers[l];
    // Attention block: xb = norm(x); q,k,v = xb W (+ b); rope; store k,v; attend; x += att Wo.
    rmsnorm_rows(xb_, x_, w.attn_norm, n);
    project(xb_, n, {{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}});
    for_tokens(n, [&](size_t t) {
      if (c.qkv_bias) {
        add_bias({&q_[t * c.q_dim()], c.q_dim()}, w.bq);
        add_bias({&k_[t * c.kv_dim()], c.kv_dim()}, w.bk);
        add_bias({&v_[t * c.kv_dim()], c.kv_dim()}, w.bv);
      }
      rotate({&q_[t * c.q_dim()], c.q_dim()}, c.num_heads, rope_, t);
      rotate({&k_[t * c.kv_dim()], c.kv_dim()}, c.num_kv_heads, rope_, t);
    });
    store_kv(batch, kv, l);
    attend(batch, kv, l);
    matmul(w.wo, att_, n, proj_, pool_, scratch_);
    sum_over_ranks(proj_, n);  // tensor parallelism: each rank's heads' share
    add_to_residual(proj_, n);

    // Feed-forward block: x += W_down (silu(xb W_gate) * xb W_up).
    rmsnorm_rows(xb_, x_, w.ffn_norm, n);
    project(xb_, n, {{&w.w_gate, gate_.data()}, {&w.w_up, up_.data()}});
    gate_activation(n, [](std::span<float> gate, std::span<const float> up) { swiglu(gate, up); });
    matmul(w.w_down, gate_, n, proj_, pool_, scratch_);
    sum_over_ranks(proj_, n);  // each rank's FFN columns' share
    add_to_residual(proj_, n);
  }
  compute_logits(batch, logits);
}

}  // namespace kvs
