#include "model/deepseek2_forward.h"

#include <algorithm>
#include <cmath>

#include "attention/compact_kv.h"
#include "attention/write_kv.h"
#include "tensor/ops.h"

namespace kvs {
namespace {}  // namespace

Deepseek2Forward::Deepseek2Forward(const DecoderModel& model, ThreadPool& pool, MlaForm form)
    : DecoderForward(model.config(), model.weights(), pool),
      form_(form),
      rope_{.inv_freq = config_.rope_frequencies(), .cos = {}, .sin = {}},
      absorbed_query_scale_(config_.attention_scale * std::sqrt(static_cast<float>(config_.latent_width()))),
      expanded_query_scale_(config_.attention_scale * std::sqrt(static_cast<float>(config_.head_dim))),
      latent_attention_(pool, {.num_heads = config_.num_heads, .num_kv_heads = 1, .head_dim = config_.latent_width()}),
      expanded_attention_(pool, {.num_heads = config_.num_heads,
                                 .num_kv_heads = config_.num_heads,
                                 .head_dim = config_.head_dim,
                                 .v_head_dim = config_.mla.value_dim}),
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
  latent_attention_.run(kv[g], batch.layers->index_in_group[layer], sub, q_latent_, out_latent_,
                        batch.layers->attention_window[layer]);
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
  const size_t width = c.latent_width(), value = c.mla.value_dim, m = tokens.size();
  const size_t g = batch.layers->group_of[layer], at_layer = batch.layers->index_in_group[layer];
  const AttentionBatch& ab = batch.kv[g].attention;
  const KvStorage& cache = kv[g];
  const size_t bs = cache.block_size();
  // The sequences these tokens belong to, numbered in order of first appearance: expanded sequence i is block i.
  sequence_map_.assign(ab.sequences.size(), UINT32_MAX);
  sub_sequences_.clear();
  size_t capacity = 0;
  for (uint32_t t : tokens) {
    uint32_t& mapped = sequence_map_[ab.sequence_of_token[t]];
    if (mapped != UINT32_MAX) continue;
    mapped = static_cast<uint32_t>(sub_sequences_.size());
    sub_sequences_.push_back(ab.sequences[ab.sequence_of_token[t]]);
    capacity = std::max<size_t>(capacity, sub_sequences_.back().num_cached);
  }
  const size_t num_seqs = sub_sequences_.size();
  if (!expanded_kv_ || expanded_kv_->block_size() < capacity || expanded_kv_->num_blocks() < num_seqs) {
    const size_t block = std::max(capacity, expanded_kv_ ? expanded_kv_->block_size() : 0);
    const size_t blocks = std::max(num_seqs, expanded_kv_ ? expanded_kv_->num_blocks() : 0);
    expanded_kv_ = std::make_unique<KvStorage>(KvCacheSpec{.num_layers = 1,
                                                           .num_kv_heads = heads,
                                                           .head_dim = hd,
                                                           .v_head_dim = value,
                                                           .dtype = {KvDType::kF32, KvDType::kF32},
                                                           .block_size = block,
                                                           .contiguous = true},
                                               blocks);
  }
  sub_blocks_.resize(num_seqs);
  for (size_t i = 0; i < num_seqs; ++i) {
    // Read sequence i's cached latents back (as attention would see them: quantized formats dequantized), expand
    // them through kv_b, and store K = [k_nope | k_pe] and V per head into block i of the expanded cache.
    SequenceAttention& s = sub_sequences_[i];
    const size_t slots = s.num_cached;
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
    k_rows_.resize(slots * heads * hd);
    v_rows_.resize(slots * heads * value);
    pool_.parallel_for(slots, 16, [&](size_t begin, size_t end) {
      for (size_t slot = begin; slot < end; ++slot) {
        for (size_t h = 0; h < heads; ++h) {
          const float* up = &kv_up_[(slot * heads + h) * (nope + value)];
          float* k = &k_rows_[(slot * heads + h) * hd];
          std::copy_n(up, nope, k);
          std::copy_n(&rows_[slot * width + r], c.rope_dim, k + nope);
          std::copy_n(up + nope, value, &v_rows_[(slot * heads + h) * value]);
        }
      }
    });
    const size_t block_size = expanded_kv_->block_size();
    write_kv_run(*expanded_kv_, 0, KvSlot{i * block_size}, slots, {k_rows_.data(), slots * heads * hd},
                 {v_rows_.data(), slots * heads * value});
    sub_blocks_[i] = BlockId{static_cast<uint32_t>(i)};
  }
  for (size_t i = 0; i < num_seqs; ++i) {
    sub_sequences_[i].blocks = {&sub_blocks_[i], 1};
    sub_sequences_[i].slot_mass = {};  // per-slot mass is kept for the latent cache's one head only
  }
  q_sub_.resize(m * c.q_dim());
  sub_sequence_of_token_.resize(m);
  sub_visible_.resize(m);
  for (size_t i = 0; i < m; ++i) {
    const uint32_t t = tokens[i];
    for (size_t j = 0; j < c.q_dim(); ++j) q_sub_[i * c.q_dim() + j] = q_[t * c.q_dim() + j] * expanded_query_scale_;
    sub_sequence_of_token_[i] = sequence_map_[ab.sequence_of_token[t]];
    sub_visible_[i] = ab.visible_slots[t];
  }
  const AttentionBatch sub{
      .sequences = sub_sequences_, .sequence_of_token = sub_sequence_of_token_, .visible_slots = sub_visible_};
  out_sub_.resize(m * heads * value);
  expanded_attention_.run(*expanded_kv_, 0, sub, q_sub_, out_sub_, batch.layers->attention_window[layer]);
  for (size_t i = 0; i < m; ++i)
    std::copy_n(&out_sub_[i * heads * value], heads * value, &att_[tokens[i] * heads * value]);
}

}  // namespace kvs
