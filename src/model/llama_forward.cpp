#include "model/llama_forward.h"

#include <algorithm>

#include "tensor/convert.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

namespace kvs {

LlamaForward::LlamaForward(const LlamaModel& model, ThreadPool& pool)
    : config_(model.config()),
      weights_(model.weights()),
      pool_(pool),
      attention_(pool,
                 {.num_heads = config_.num_heads, .num_kv_heads = config_.num_kv_heads, .head_dim = config_.head_dim}),
      rope_inv_freq_(rope_inverse_frequencies(config_.rope_dim, config_.rope_freq_base)) {}

void LlamaForward::project(std::span<const float> x, size_t n,
                           std::initializer_list<std::pair<const WeightView*, float*>> outs) {
  // One quantization of x feeds every matrix when they all take int8 activations (Q8_0/Q4_0 weights).
  bool all_int8 = true;
  for (const auto& [w, y] : outs) {
    all_int8 = all_int8 && matmul_activations(w->type, best_isa()) == MatmulActivations::kInt8Blocks;
  }
  const size_t cols = outs.begin()->first->cols;
  if (all_int8) {
    quantize_activations(x.first(n * cols), n, cols, xq_, pool_);
    std::vector<QuantizedMatmul> group;
    for (const auto& [w, y] : outs) group.push_back({.w = w, .y = {y, n * w->rows}});
    matmul_quantized_group(group, xq_, pool_);
    return;
  }
  for (const auto& [w, y] : outs) matmul(*w, x.first(n * cols), n, {y, n * w->rows}, pool_, scratch_);
}

void LlamaForward::resize(size_t n) {
  const ModelConfig& c = config_;
  if (x_.size() >= n * c.dim) return;
  x_.resize(n * c.dim);
  xb_.resize(n * c.dim);
  q_.resize(n * c.q_dim());
  k_.resize(n * c.kv_dim());
  v_.resize(n * c.kv_dim());
  att_.resize(n * c.q_dim());
  proj_.resize(n * c.dim);
  gate_.resize(n * c.ffn_dim);
  up_.resize(n * c.ffn_dim);
}

void LlamaForward::forward(const ForwardBatch& batch, KvStorage& kv, std::span<float> logits) {
  const ModelConfig& c = config_;
  const size_t n = batch.tokens.size();
  KVS_ASSERT(batch.positions.size() == n && batch.attention.sequence_of_token.size() == n && batch.kv_slots.size() == n,
             "batch arrays disagree: {} tokens, {} positions, {} sequence ids, {} slots", n, batch.positions.size(),
             batch.attention.sequence_of_token.size(), batch.kv_slots.size());
  KVS_ASSERT(logits.size() >= batch.logits_for.size() * c.vocab_size, "logits buffer {} < {} x {}", logits.size(),
             batch.logits_for.size(), c.vocab_size);
  const KvCacheSpec& kv_spec = kv.spec();
  KVS_ASSERT(kv_spec.num_layers == c.num_layers && kv_spec.num_kv_heads == c.num_kv_heads &&
                 kv_spec.head_dim == c.head_dim && kv_spec.value_width() == c.head_dim && kv.has_values(),
             "KV storage shape (layers {}, kv heads {}, head dims {}/{}) does not match the model", kv_spec.num_layers,
             kv_spec.num_kv_heads, kv_spec.head_dim, kv_spec.value_width());
  if (n == 0) return;
  resize(n);

  // x[t] = embedding row of token t.
  for (size_t t = 0; t < n; ++t) {
    const TokenId id = batch.tokens[t];
    KVS_ASSERT(id >= 0 && static_cast<size_t>(id) < c.vocab_size, "token id {} outside vocabulary of {}", id,
               c.vocab_size);
    dequantize_row(weights_.token_embedding.type, weights_.token_embedding.row(id), &x_[t * c.dim], c.dim);
  }

  write_runs_ = kv_write_runs(batch.kv_slots, kv.block_size());

  // RoPE angles depend only on the position: once per token for every layer, Q and K.
  const size_t half_rope = c.rope_dim / 2;
  rope_cos_.resize(n * half_rope);
  rope_sin_.resize(n * half_rope);
  for (size_t t = 0; t < n; ++t) {
    rope_cos_sin(batch.positions[t], rope_inv_freq_, {&rope_cos_[t * half_rope], half_rope},
                 {&rope_sin_[t * half_rope], half_rope});
  }

  for (size_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    // Attention block: xb = norm(x); q,k,v = xb W; rope; store k,v; attend; x += att Wo.
    for (size_t t = 0; t < n; ++t) {
      rmsnorm({&xb_[t * c.dim], c.dim}, {&x_[t * c.dim], c.dim}, w.attn_norm, c.rms_eps);
    }
    project(xb_, n, {{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}});
    // RoPE split by tokens, then the stores split by block runs (the write path's unit). The stores mostly
    // miss the cache (a new slot's lines were never read), so on one thread they took several percent of a
    // batched decode step.
    pool_.parallel_for(n, 1, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) {
        const std::span<const float> cos{&rope_cos_[t * half_rope], half_rope},
            sin{&rope_sin_[t * half_rope], half_rope};
        rope_interleaved({&q_[t * c.q_dim()], c.q_dim()}, c.num_heads, c.head_dim, cos, sin);
        rope_interleaved({&k_[t * c.kv_dim()], c.kv_dim()}, c.num_kv_heads, c.head_dim, cos, sin);
      }
    });
    pool_.parallel_for(write_runs_.size(), 1, [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r) {
        const KvWriteRun run = write_runs_[r];
        const size_t floats = run.count * c.kv_dim(), at = run.first * c.kv_dim();
        const KvSlot first = batch.kv_slots[run.first];
        const std::span<const uint32_t> tails = batch.attention.key_tails;
        const uint32_t tail = tails.empty() ? kNoKeyTail : tails[first.value / kv.block_size()];
        write_kv_run(kv, l, first, run.count, {&k_[at], floats}, {&v_[at], floats}, tail);
      }
    });
    attention_.run(kv, l, batch.attention, q_, att_);
    matmul(w.wo, att_, n, proj_, pool_, scratch_);
    for (size_t i = 0; i < n * c.dim; ++i) x_[i] += proj_[i];

    // Feed-forward block: x += W_down (silu(xb W_gate) * xb W_up).
    for (size_t t = 0; t < n; ++t) {
      rmsnorm({&xb_[t * c.dim], c.dim}, {&x_[t * c.dim], c.dim}, w.ffn_norm, c.rms_eps);
    }
    project(xb_, n, {{&w.w_gate, gate_.data()}, {&w.w_up, up_.data()}});
    pool_.parallel_for(n, 1, [&](size_t begin, size_t end) {
      swiglu({&gate_[begin * c.ffn_dim], (end - begin) * c.ffn_dim},
             {&up_[begin * c.ffn_dim], (end - begin) * c.ffn_dim});
    });
    matmul(w.w_down, gate_, n, proj_, pool_, scratch_);
    for (size_t i = 0; i < n * c.dim; ++i) x_[i] += proj_[i];
  }

  // Logits only for the rows asked for.
  const size_t m = batch.logits_for.size();
  if (m == 0) return;
  final_.resize(m * c.dim);
  for (size_t i = 0; i < m; ++i) {
    const size_t t = batch.logits_for[i];
    KVS_ASSERT(t < n, "logits requested for token {} of a batch of {}", t, n);
    rmsnorm({&final_[i * c.dim], c.dim}, {&x_[t * c.dim], c.dim}, weights_.output_norm, c.rms_eps);
  }
  matmul(weights_.output, final_, m, logits, pool_, scratch_);
}

}  // namespace kvs
