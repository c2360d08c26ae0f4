#include "model/deepseek2_forward.h"

#include <algorithm>
#include <cmath>

#include "attention/compact_kv.h"
#include "tensor/ops.h"

namespace kvs {

Deepseek2Forward::Deepseek2Forward(const DecoderModel& model, ThreadPool& pool, MlaForm form)
    : DecoderForward(model.config(), model.weights(), pool),
      form_(form),
      rope_{.inv_freq = config_.rope_frequencies(), .cos = {}, .sin = {}},
      absorbed_query_scale_(config_.attention_scale * std::sqrt(static_cast<float>(config_.latent_width()))),
      latent_attention_(pool, {.num_heads = config_.num_heads, .num_kv_heads = 1, .head_dim = config_.latent_width()}),
      latent_bf16_(pool, {.num_heads = config_.num_heads, .num_kv_heads = 1, .head_dim = config_.latent_width()}),
      moe_(config_, pool) {}

bool Deepseek2Forward::kv_matches(const KvCacheSpec& spec) const {
  return spec.mla && spec.kv_lora_rank == config_.mla.kv_lora_rank && spec.rope_dim == config_.rope_dim;
}

void Deepseek2Forward::forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) {
  const ModelConfig& c = config_;
  const MlaConfig& mla = c.mla;
  const size_t n = begin(batch, kv, logits);
  if (n == 0) return;
  rope_tables(batch.positions, rope_);
  const size_t hd = c.head_dim, r = mla.kv_lora_rank, width = c.latent_width(), half = rope_.inv_freq.size();
  latent_.resize(n * width);
  if (att_.size() < n * c.num_heads * mla.value_dim) att_.resize(n * c.num_heads * mla.value_dim);
  q_a_.resize(n * mla.q_lora_rank);

  for (size_t l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& w = weights_.layers[l];
    const MlaLayerWeights& m = w.mla;
    rmsnorm_rows(xb_, x_, w.attn_norm, n);
    if (mla.q_lora_rank > 0) {
      project(xb_, n, {{&m.q_a, q_a_.data()}, {&m.kv_a, latent_.data()}});
      for_tokens(n, [&](size_t t) {
        const std::span<float> row{&q_a_[t * mla.q_lora_rank], mla.q_lora_rank};
        rmsnorm(row, row, m.q_a_norm, c.rms_eps);
      });
      matmul(m.q_b, q_a_, n, q_, pool_, scratch_);
    } else {
      project(xb_, n, {{&w.wq, q_.data()}, {&m.kv_a, latent_.data()}});
    }
    // Per token: the latent normed, its key part and every head's query part rotated (one k_pe for all heads).
    for_tokens(n, [&](size_t t) {
      const std::span<const float> cos{&rope_.cos[t * half], half}, sin{&rope_.sin[t * half], half};
      float* row = &latent_[t * width];
      rmsnorm({row, r}, {row, r}, m.kv_a_norm, c.rms_eps);
      rope_interleaved({row + r, c.rope_dim}, 1, c.rope_dim, cos, sin);
      for (size_t h = 0; h < c.num_heads; ++h)
        rope_interleaved({&q_[t * c.q_dim() + h * hd + mla.nope_dim], c.rope_dim}, 1, c.rope_dim, cos, sin);
    });
    store_rows(batch, kv, l, {latent_.data(), n * width}, {}, width);
    attention(batch, kv, l);
    matmul(w.wo, std::span<const float>(att_).first(n * c.num_heads * mla.value_dim), n, proj_, pool_, scratch_);
    add_to_residual(proj_, n);

    rmsnorm_rows(xb_, x_, w.ffn_norm, n);
    if (c.moe.is_moe_layer(l)) {
      moe_.run(w.moe, xb_, n, proj_);
    } else {
      project(xb_, n, {{&w.w_gate, gate_.data()}, {&w.w_up, up_.data()}});
      gate_activation(n, [](std::span<float> gate, std::span<const float> up) { swiglu(gate, up); });
      matmul(w.w_down, gate_, n, proj_, pool_, scratch_);
    }
    add_to_residual(proj_, n);
  }
  compute_logits(batch, logits);
}

void Deepseek2Forward::attention(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer) {
  const AttentionBatch& ab = batch.kv[batch.layers->group_of[layer]].attention;
  const size_t n = batch.tokens.size();
  absorbed_tokens_.clear();
  expanded_tokens_.clear();
  std::vector<uint32_t> tokens_of(ab.sequences.size(), 0);
  for (size_t t = 0; t < n; ++t) ++tokens_of[ab.sequence_of_token[t]];
  for (size_t t = 0; t < n; ++t) {
    const bool expand = form_ == MlaForm::kExpanded ||
                        (form_ == MlaForm::kAuto && tokens_of[ab.sequence_of_token[t]] >= kMlaExpandFromTokens);
    (expand ? expanded_tokens_ : absorbed_tokens_).push_back(static_cast<uint32_t>(t));
  }
  if (!absorbed_tokens_.empty()) attend_absorbed(batch, kv, layer, absorbed_tokens_);
  if (!expanded_tokens_.empty()) attend_expanded(batch, kv, layer, expanded_tokens_);
}

void Deepseek2Forward::per_head_matmul(const std::function<WeightView(size_t)>& w_of, std::span<const float> x,
                                       size_t m, size_t x_stride, size_t x_head_stride, size_t x_offset,
                                       std::span<float> y, size_t y_head_stride) {
  const size_t heads = config_.num_heads, cols = w_of(0).cols, rows = w_of(0).rows;
  pool_.parallel_for(heads, 1, [&](size_t begin, size_t end) {
    std::vector<float> in(m * cols), out(m * rows);
    for (size_t h = begin; h < end; ++h) {
      for (size_t i = 0; i < m; ++i) std::copy_n(&x[i * x_stride + x_offset + h * x_head_stride], cols, &in[i * cols]);
      matmul_rows(w_of(h), in, m, out, 0, rows, best_isa());
      for (size_t i = 0; i < m; ++i) std::copy_n(&out[i * rows], rows, &y[(i * heads + h) * y_head_stride]);
    }
  });
}

void Deepseek2Forward::attend_absorbed(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer,
                                       std::span<const uint32_t> tokens) {
  const ModelConfig& c = config_;
  const MlaLayerWeights& w = weights_.layers[layer].mla;
  const size_t heads = c.num_heads, hd = c.head_dim, r = c.mla.kv_lora_rank, nope = c.mla.nope_dim;
  const size_t width = c.latent_width(), value = c.mla.value_dim, m = tokens.size();
  const size_t g = batch.layers->group_of[layer];
  const AttentionBatch& ab = batch.kv[g].attention;
  // The tokens' query rows, gathered: [m][H][head_dim].
  q_sub_.resize(m * c.q_dim());
  for (size_t i = 0; i < m; ++i) std::copy_n(&q_[tokens[i] * c.q_dim()], c.q_dim(), &q_sub_[i * c.q_dim()]);
  // q_latent[i][h] = [W_kb[h]^T q_nope | q_pe] x the scale the kernel's 1/sqrt(width) must become.
  q_latent_.resize(m * heads * width);
  out_latent_.resize(m * heads * width);
  per_head_matmul([&](size_t h) { return w.k_b_head(h, r); }, q_sub_, m, c.q_dim(), hd, 0, q_latent_, width);
  for (size_t i = 0; i < m; ++i) {
    for (size_t h = 0; h < heads; ++h) {
      float* q = &q_latent_[(i * heads + h) * width];
      std::copy_n(&q_sub_[i * c.q_dim() + h * hd + nope], c.rope_dim, q + r);
      for (size_t j = 0; j < width; ++j) q[j] *= absorbed_query_scale_;
    }
  }
  // The tokens' attention batch: the same sequences, their rows of the per-token arrays.
  sub_sequence_of_token_.resize(m);
  sub_visible_.resize(m);
  for (size_t i = 0; i < m; ++i) {
    sub_sequence_of_token_[i] = ab.sequence_of_token[tokens[i]];
    sub_visible_[i] = ab.visible_slots[tokens[i]];
  }
  const AttentionBatch sub{.sequences = ab.sequences,
                           .sequence_of_token = sub_sequence_of_token_,
                           .visible_slots = sub_visible_,
                           .key_tails = ab.key_tails};
  const size_t window = batch.layers->attention_window[layer], index = batch.layers->index_in_group[layer];
  if (latent_bf16_.applies(kv[g], sub, window)) {
    latent_bf16_.run(kv[g], index, sub, q_latent_, out_latent_);
  } else {
    latent_attention_.run(kv[g], index, sub, q_latent_, out_latent_, window);
  }
  // Head h's output: W_vb[h] (its attention-weighted latent, the first r of the row).
  out_sub_.resize(m * heads * value);
  per_head_matmul([&](size_t h) { return w.v_b_head(h, value); }, out_latent_, m, heads * width, width, 0, out_sub_,
                  value);
  for (size_t i = 0; i < m; ++i)
    std::copy_n(&out_sub_[i * heads * value], heads * value, &att_[tokens[i] * heads * value]);
}

void Deepseek2Forward::attend_expanded(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer,
                                       std::span<const uint32_t> tokens) {
  const ModelConfig& c = config_;
  const MlaLayerWeights& w = weights_.layers[layer].mla;
  const size_t heads = c.num_heads, hd = c.head_dim, r = c.mla.kv_lora_rank, nope = c.mla.nope_dim;
  const size_t width = c.latent_width(), value = c.mla.value_dim;
  const size_t g = batch.layers->group_of[layer], at_layer = batch.layers->index_in_group[layer];
  const AttentionBatch& ab = batch.kv[g].attention;
  const KvStorage& cache = kv[g];
  const size_t bs = cache.block_size();
  // Sequence by sequence (in order of first appearance among `tokens`), its tokens attend as MHA over its cached
  // latents expanded to per-head K and V: per head two matrix products over all its tokens at once (scores =
  // K q, out = V^T p), so each expanded row is read once per step, not once per token.
  std::vector<bool> done(ab.sequences.size(), false);
  for (uint32_t first : tokens) {
    const uint32_t seq = ab.sequence_of_token[first];
    if (done[seq]) continue;
    done[seq] = true;
    sub_tokens_.clear();
    for (uint32_t t : tokens)
      if (ab.sequence_of_token[t] == seq) sub_tokens_.push_back(t);
    const SequenceAttention& s = ab.sequences[seq];
    const size_t slots = s.num_cached, m = sub_tokens_.size();
    // The cached latents read back as attention reads them (quantized formats dequantized), split into c and k_pe.
    rows_.resize(slots * width);
    c_.resize(slots * r);
    pool_.parallel_for(slots, 16, [&](size_t begin, size_t end) {
      for (size_t slot = begin; slot < end; ++slot) {
        const BlockId block = s.blocks[slot / bs];
        KVS_ASSERT(block != kNullBlock, "MLA expansion over a hole at slot {}", slot);
        read_kv_row(cache.format().k, cache.keys(at_layer, block, 0), slot % bs, &rows_[slot * width]);
        std::copy_n(&rows_[slot * width], r, &c_[slot * r]);
      }
    });
    kv_up_.resize(slots * heads * (nope + value));
    matmul(w.kv_b, c_, slots, kv_up_, pool_, scratch_);
    k_rows_.resize(slots * hd);
    v_rows_.resize(value * slots);
    q_sub_.resize(m * hd);
    scores_.resize(m * slots);
    out_sub_.resize(m * value);
    for (size_t h = 0; h < heads; ++h) {
      // K_h [slots][nope + rope] = [W_kb[h] c | k_pe]; V_h^T [value][slots]; the tokens' queries [m][head_dim].
      for (size_t slot = 0; slot < slots; ++slot) {
        const float* up = &kv_up_[(slot * heads + h) * (nope + value)];
        std::copy_n(up, nope, &k_rows_[slot * hd]);
        std::copy_n(&rows_[slot * width + r], c.rope_dim, &k_rows_[slot * hd + nope]);
        for (size_t i = 0; i < value; ++i) v_rows_[i * slots + slot] = up[nope + i];
      }
      for (size_t i = 0; i < m; ++i) std::copy_n(&q_[sub_tokens_[i] * c.q_dim() + h * hd], hd, &q_sub_[i * hd]);
      const WeightView keys{
          .type = DType::kF32, .data = reinterpret_cast<const std::byte*>(k_rows_.data()), .rows = slots, .cols = hd};
      matmul(keys, q_sub_, m, scores_, pool_, scratch_);
      // Token i sees slots [0, visible): scaled, the rest masked to probability 0.
      for_tokens(m, [&](size_t i) {
        const size_t visible = ab.visible_slots[sub_tokens_[i]];
        float* row = &scores_[i * slots];
        for (size_t j = 0; j < visible; ++j) row[j] *= c.attention_scale;
        softmax({row, visible});
        std::fill(row + visible, row + slots, 0.0f);
      });
      const WeightView values_t{.type = DType::kF32,
                                .data = reinterpret_cast<const std::byte*>(v_rows_.data()),
                                .rows = value,
                                .cols = slots};
      matmul(values_t, scores_, m, out_sub_, pool_, scratch_);
      for (size_t i = 0; i < m; ++i)
        std::copy_n(&out_sub_[i * value], value, &att_[(sub_tokens_[i] * heads + h) * value]);
    }
  }
}

}  // namespace kvs
