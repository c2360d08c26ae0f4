#include "model/llama_forward.h"

#include <algorithm>

#include "attention/paged_attention.h"
#include "tensor/convert.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

namespace kvs {

LlamaForward::LlamaForward(const LlamaModel& model, ThreadPool& pool)
    : config_(model.config()),
      weights_(model.weights()),
      pool_(pool),
      scores_(pool.num_threads()),
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
  KVS_ASSERT(batch.positions.size() == n && batch.sequence_of_token.size() == n && batch.kv_slots.size() == n,
             "batch arrays disagree: {} tokens, {} positions, {} sequence ids, {} slots", n, batch.positions.size(),
             batch.sequence_of_token.size(), batch.kv_slots.size());
  KVS_ASSERT(logits.size() >= batch.logits_for.size() * c.vocab_size, "logits buffer {} < {} x {}", logits.size(),
             batch.logits_for.size(), c.vocab_size);
  KVS_ASSERT(kv.shape().num_layers == c.num_layers && kv.shape().num_kv_heads == c.num_kv_heads &&
                 kv.shape().head_dim == c.head_dim,
             "KV storage shape (layers {}, kv heads {}, head dim {}) does not match the model", kv.shape().num_layers,
             kv.shape().num_kv_heads, kv.shape().head_dim);
  if (n == 0) return;
  resize(n);

  // x[t] = embedding row of token t.
  for (size_t t = 0; t < n; ++t) {
    const TokenId id = batch.tokens[t];
    KVS_ASSERT(id >= 0 && static_cast<size_t>(id) < c.vocab_size, "token id {} outside vocabulary of {}", id,
               c.vocab_size);
    dequantize_row(weights_.token_embedding.type, weights_.token_embedding.row(id), &x_[t * c.dim], c.dim);
  }

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
    // Split by tokens: each token's K/V go to its own slots. The stores mostly miss the cache (a new slot's
    // lines were never read), so on one thread they took several percent of a batched decode step.
    pool_.parallel_for(n, 1, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) {
        const std::span<const float> cos{&rope_cos_[t * half_rope], half_rope},
            sin{&rope_sin_[t * half_rope], half_rope};
        rope_interleaved({&q_[t * c.q_dim()], c.q_dim()}, c.num_heads, c.head_dim, cos, sin);
        rope_interleaved({&k_[t * c.kv_dim()], c.kv_dim()}, c.num_kv_heads, c.head_dim, cos, sin);
        kv.write(l, batch.kv_slots[t], {&k_[t * c.kv_dim()], c.kv_dim()}, {&v_[t * c.kv_dim()], c.kv_dim()});
      }
    });
    attention_layer(batch, kv, l, n);
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

void LlamaForward::attention_layer(const ForwardBatch& batch, const KvStorage& kv, size_t layer, size_t n) {
  const ModelConfig& c = config_;
  const AttentionShape shape{.num_heads = c.num_heads, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim};
  // Work items: (token, kv head) pairs in that order. An item costs about its context length (plus a fixed
  // part), and in a batch of decode tokens the contexts differ widely, so the items are cut into chunks of
  // about equal total cost rather than an equal count. (Each item is computed the same way wherever it
  // runs: the split cannot change results.)
  constexpr size_t kFixedCost = 32;  // positions' worth of per-call work
  constexpr size_t kAttentionChunksPerThread = 4;
  attention_cost_.resize(n + 1);
  attention_cost_[0] = 0;
  for (size_t t = 0; t < n; ++t) attention_cost_[t + 1] = attention_cost_[t] + batch.positions[t] + 1 + kFixedCost;
  const size_t heads = c.num_kv_heads;
  const size_t total = attention_cost_[n] * heads;
  // Cost of items [0, item): whole tokens before it, plus its token's heads before it.
  const auto cost_before = [&](size_t item) {
    const size_t t = item / heads, h = item % heads;
    return attention_cost_[t] * heads + (t < n ? (attention_cost_[t + 1] - attention_cost_[t]) * h : 0);
  };
  // The first item whose preceding cost reaches `target` (cost_before grows with the item: binary search).
  const auto first_item_at = [&](size_t target) {
    size_t lo = 0, hi = n * heads;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (cost_before(mid) < target)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  // A few chunks of equal cost per thread, claimed by whichever thread is free.
  const size_t chunks = std::min(n * heads, pool_.num_threads() * kAttentionChunksPerThread);
  pool_.for_chunks(chunks, [&](size_t chunk, size_t thread) {
    std::vector<float>& scores = scores_[thread];
    const size_t begin = first_item_at(total * chunk / chunks);
    const size_t end = chunk + 1 == chunks ? n * heads : first_item_at(total * (chunk + 1) / chunks);
    // The items of one token go in one call (KV heads [g_begin, g_end)), which reads each block of the
    // token's context as one stream.
    for (size_t item = begin; item < end;) {
      const size_t t = item / heads, g_begin = item % heads;
      const size_t g_end = std::min(heads, g_begin + (end - item));
      const size_t n_ctx = batch.positions[t] + 1;
      const size_t rows = (g_end - g_begin) * (c.num_heads / heads);  // query heads of the call
      if (scores.size() < rows * n_ctx) scores.resize(c.num_heads * std::max(n_ctx, c.context_length));
      const SequenceKvView& seq = batch.sequences[batch.sequence_of_token[t]];
      paged_attention(kv, layer, seq.block_table, n_ctx, shape, &q_[t * c.q_dim()], &att_[t * c.q_dim()], g_begin,
                      g_end, scores);
      item += g_end - g_begin;
    }
  });
}

}  // namespace kvs
