// DeepSeek-V2 on the GPU: MLA's attention in absorbed form and the mixture of experts (model/deepseek2_forward.h's
// and model/moe_ffn.h's, op for op).
#include <algorithm>
#include <cmath>

#include "gpu/gpu_decoder_runner.h"

namespace kvs {

// Queries (directly, or through q_a, its norm and q_b) of H heads [nope | rope]; the latent row [c | k_pe] of each
// token: c = norm(x W_kv_a[:r]), k_pe = rope(x W_kv_a[r:]), stored in the cache (one row a token, one "KV head");
// then each sequence's tokens attend in the form mla_form_ chooses for it (absorbed, or expanded: mla_expanded).
void GpuDecoderRunner::mla_attention(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv,
                                     size_t l, GpuBuffer& xb, GpuBuffer& scores, GpuBuffer& att) {
  const ModelConfig& c = model_.shard_config();
  const MlaConfig& mla = c.mla;
  const size_t n = batch.tokens.size(), heads = c.num_heads;
  const uint32_t tokens = static_cast<uint32_t>(n), hd = static_cast<uint32_t>(c.head_dim);
  const uint32_t r = static_cast<uint32_t>(mla.kv_lora_rank), width = static_cast<uint32_t>(c.latent_width());
  const uint32_t nope = static_cast<uint32_t>(mla.nope_dim), half = static_cast<uint32_t>(inv_freq_.size());
  constexpr GpuMemory kDevice = GpuMemory::kDeviceLocal;
  GpuBuffer& q = *q_;
  GpuBuffer& latent = ensure(latent_, n * width * 4, kDevice);
  ensure(q_latent_, n * heads * width * 4, kDevice);  // the absorbed form's
  ensure(out_latent_, n * heads * r * 4, kDevice);
  if (mla.q_lora_rank > 0) {
    GpuBuffer& q_a = ensure(q_a_, n * mla.q_lora_rank * 4, kDevice);
    matvec(w.q_a, xb, q_a, n);
    check(ops_->rmsnorm(q_a, *w.q_a_norm, q_a, tokens, static_cast<uint32_t>(mla.q_lora_rank), c.rms_eps),
          "in the query norm");
    matvec(w.q_b, q_a, q, n);
  } else {
    matvec(w.wq, xb, q, n);
  }
  matvec(w.kv_a, xb, latent, n);
  check(ops_->rmsnorm(latent, *w.kv_a_norm, latent, tokens, r, c.rms_eps, width), "in the latent's norm");
  // DeepSeek's RoPE is interleaved: the latent's key part, and every query head's rope part.
  RopeBuffers& angles = global_rope_;
  check(ops_->rope(latent, *angles.cos, *angles.sin, tokens, 1, width, half, false, r), "in the latent's RoPE");
  check(ops_->rope(q, *angles.cos, *angles.sin, tokens, static_cast<uint32_t>(heads), hd, half, false, nope),
        "in RoPE");

  const size_t g = batch.layers->group_of[l], at = batch.layers->index_in_group[l];
  KvStorage& storage = kv[g];
  const KvFormat& format = storage.format();
  GroupBuffers& gb = groups_[g];
  GpuBuffer& rows = pool(storage, at, true);
  check(ops_->kv_write(format.k, latent, rows, *gb.slots, tokens, 1), "writing the latent");

  const std::vector<Expansion> expansions = plan_expansions(batch.kv[g].attention, storage.block_size());
  size_t expanded = 0;
  for (const Expansion& e : expansions) expanded += e.tokens;
  if (expanded < n) absorbed_attention(w, batch, l, format, q, rows, scores, att);
  if (!expansions.empty()) mla_expanded(w, batch, kv, l, expansions, scores, att);
}

// The absorbed form: the queries [W_kb[h]^T q_nope[h] | q_pe[h]] attend over the latent rows as MQA, the values
// being their first r; head h's output is W_vb[h] times its attention-weighted latent. Decode never builds per-head K
// or V.
void GpuDecoderRunner::absorbed_attention(const GpuLayerWeights& w, const ForwardBatch& batch, size_t l,
                                          const KvFormat& format, GpuBuffer& q, GpuBuffer& rows, GpuBuffer& scores,
                                          GpuBuffer& att) {
  const ModelConfig& c = model_.shard_config();
  const MlaConfig& mla = c.mla;
  const size_t n = batch.tokens.size(), heads = c.num_heads;
  const uint32_t tokens = static_cast<uint32_t>(n), hd = static_cast<uint32_t>(c.head_dim);
  const uint32_t r = static_cast<uint32_t>(mla.kv_lora_rank), width = static_cast<uint32_t>(c.latent_width());
  const uint32_t nope = static_cast<uint32_t>(mla.nope_dim), rope = static_cast<uint32_t>(c.rope_dim);
  const uint32_t value = static_cast<uint32_t>(mla.value_dim);
  const size_t g = batch.layers->group_of[l], at = batch.layers->index_in_group[l];
  GroupBuffers& gb = groups_[g];
  GpuBuffer &q_latent = *q_latent_, &out_latent = *out_latent_;
  // q_latent[t][h] = [W_kb[h]^T q_nope[t][h] | q_pe[t][h]].
  const uint32_t q_row = static_cast<uint32_t>(heads) * hd, latent_row = static_cast<uint32_t>(heads) * width;
  for (size_t h = 0; h < heads; ++h) {
    const GpuMatrix& k_b = w.k_b[h];
    for (const GpuMatrixPart& part : k_b.parts) {
      check(ops_->matvec(k_b.type, *part.buffer, q, q_latent, part.rows, k_b.cols, tokens, latent_row,
                         static_cast<uint32_t>(h) * width + part.first_row, q_row, static_cast<uint32_t>(h) * hd),
            "absorbing the key projection into the queries");
    }
  }
  check(ops_->copy_rows(q, {.stride = q_row, .head_stride = hd, .offset = nope}, q_latent,
                        {.stride = latent_row, .head_stride = width, .offset = r}, tokens, static_cast<uint32_t>(heads),
                        rope),
        "copying the queries' RoPE parts");
  const GpuOps::AttentionShape shape{.heads = static_cast<uint32_t>(heads),
                                     .kv_heads = 1,
                                     .head_dim = width,
                                     .value_width = r,
                                     .block_size = static_cast<uint32_t>(format.k.rows),
                                     .max_blocks = gb.max_blocks,
                                     .max_slots = gb.max_slots,
                                     .scale = c.attention_scale,
                                     .window = batch.layers->attention_window[l],
                                     .value_row_width = width};
  check(ops_->paged_attention(format.k, format.k, q_latent, rows, rows, *gb.tables, *gb.tokens, scores, out_latent,
                              tokens, shape),
        "in latent attention");
  sum_slot_mass(gb, scores, shape, at);
  // att[t][h] = W_vb[h] out_latent[t][h].
  const uint32_t att_row = static_cast<uint32_t>(heads) * value;
  for (size_t h = 0; h < heads; ++h) {
    const GpuMatrix& v_b = w.v_b[h];
    for (const GpuMatrixPart& part : v_b.parts) {
      check(ops_->matvec(v_b.type, *part.buffer, out_latent, att, part.rows, v_b.cols, tokens, att_row,
                         static_cast<uint32_t>(h) * value + part.first_row, static_cast<uint32_t>(heads) * r,
                         static_cast<uint32_t>(h) * r),
            "projecting the latent outputs");
    }
  }
}

// The router's logits, each token's k experts chosen on the device, the shared experts' SwiGLU into out, each chosen
// expert's SwiGLU over its token (only its rows of the stacked experts read), and their weighted sum added to out in
// expert-index order.
void GpuDecoderRunner::moe_ffn(const GpuLayerWeights& w, GpuBuffer& xb, GpuBuffer& out, size_t n) {
  const ModelConfig& c = model_.shard_config();
  const MoeConfig& moe = c.moe;
  const size_t k = moe.experts_used, f = moe.expert_ffn_dim, slots = n * k;
  const uint32_t tokens = static_cast<uint32_t>(n);
  constexpr GpuMemory kDevice = GpuMemory::kDeviceLocal;
  GpuBuffer& logits = ensure(router_logits_, n * moe.num_experts * 4, kDevice);
  GpuBuffer& ids = ensure(expert_ids_, slots * 4, kDevice);
  GpuBuffer& weights = ensure(expert_weights_, slots * 4, kDevice);
  GpuBuffer& gate = ensure(expert_gate_, slots * f * 4, kDevice);
  GpuBuffer& up = ensure(expert_up_, slots * f * 4, kDevice);
  GpuBuffer& y = ensure(expert_out_, slots * c.dim * 4, kDevice);
  matvec(w.router, xb, logits, n);
  check(ops_->moe_route(logits, ids, weights, tokens, moe), "routing to experts");
  if (moe.shared_experts > 0) {
    const size_t shared = moe.shared_experts * f;
    GpuBuffer &shared_gate = *gate_, &shared_up = *up_;  // sized for them by forward()
    matvec(w.shared_gate, xb, shared_gate, n);
    matvec(w.shared_up, xb, shared_up, n);
    check(ops_->swiglu(shared_gate, shared_up, static_cast<uint32_t>(n * shared)), "in the shared experts' SwiGLU");
    matvec(w.shared_down, shared_gate, out, n);
  }
  const auto experts = [&](const GpuExperts& e, GpuBuffer& x, GpuBuffer& into, uint32_t x_group) {
    for (const GpuExpertPart& part : e.parts) {
      check(ops_->expert_matvec(e.type, *part.buffer, x, into, ids,
                                {.rows = e.rows,
                                 .cols = e.cols,
                                 .slots = static_cast<uint32_t>(slots),
                                 .x_group = x_group,
                                 .first_expert = part.first_expert,
                                 .experts = part.experts}),
            "in an expert's product");
    }
  };
  experts(w.gate_exps, xb, gate, static_cast<uint32_t>(k));
  experts(w.up_exps, xb, up, static_cast<uint32_t>(k));
  check(ops_->swiglu(gate, up, static_cast<uint32_t>(slots * f)), "in the experts' SwiGLU");
  experts(w.down_exps, gate, y, 1);
  check(ops_->moe_combine(out, y, ids, weights, tokens, static_cast<uint32_t>(c.dim), moe), "adding the experts");
}

std::vector<GpuDecoderRunner::Expansion> GpuDecoderRunner::plan_expansions(const AttentionBatch& a,
                                                                           size_t block_size) const {
  std::vector<Expansion> out;
  if (mla_form_ == MlaForm::kAbsorbed) return out;
  const size_t n = a.sequence_of_token.size();
  std::vector<uint32_t> first(a.sequences.size(), UINT32_MAX), count(a.sequences.size(), 0);
  for (size_t t = 0; t < n; ++t) {
    const uint32_t s = a.sequence_of_token[t];
    if (first[s] == UINT32_MAX) first[s] = static_cast<uint32_t>(t);
    ++count[s];
  }
  for (uint32_t s = 0; s < a.sequences.size(); ++s) {
    if (count[s] == 0) continue;
    if (mla_form_ == MlaForm::kAuto && count[s] < kMlaExpandFromTokens) continue;
    // The expanded form reads a sequence's tokens as one run of the batch and its cache without holes (a window's):
    // otherwise its tokens stay absorbed (the forms are equal up to rounding).
    bool run = true;
    for (uint32_t t = first[s]; t < first[s] + count[s]; ++t) run = run && t < n && a.sequence_of_token[t] == s;
    const SequenceAttention& seq = a.sequences[s];
    const size_t blocks = (seq.num_cached + block_size - 1) / block_size;
    for (size_t b = 0; b < blocks && run; ++b) run = b < seq.blocks.size() && seq.blocks[b] != kNullBlock;
    if (run) out.push_back({.sequence = s, .first_token = first[s], .tokens = count[s]});
  }
  return out;
}

// A sequence's tokens attend as MHA over its cached latents expanded to per-head K = [W_kb c | k_pe] and V = W_vb c,
// built once per step as one block of an f32 pool, and written straight into their att rows.
void GpuDecoderRunner::mla_expanded(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv,
                                    size_t l, std::span<const Expansion> expansions, GpuBuffer& scores,
                                    GpuBuffer& att) {
  const ModelConfig& c = model_.shard_config();
  const MlaConfig& mla = c.mla;
  const size_t heads = c.num_heads;
  const uint32_t hd = static_cast<uint32_t>(c.head_dim), r = static_cast<uint32_t>(mla.kv_lora_rank);
  const uint32_t width = static_cast<uint32_t>(c.latent_width()), nope = static_cast<uint32_t>(mla.nope_dim);
  const uint32_t rope = static_cast<uint32_t>(c.rope_dim), value = static_cast<uint32_t>(mla.value_dim);
  const uint32_t up_row = static_cast<uint32_t>(heads) * (nope + value);
  const size_t g = batch.layers->group_of[l], at = batch.layers->index_in_group[l];
  KvStorage& storage = kv[g];
  const AttentionBatch& a = batch.kv[g].attention;
  GroupBuffers& gb = groups_[g];
  GpuBuffer& rows = pool(storage, at, true);
  // Sized for the step's largest expansion, the same at every layer (no buffer a recorded dispatch names is freed).
  size_t most = 1;
  for (const Expansion& e : expansions) most = std::max<size_t>(most, a.sequences[e.sequence].num_cached);
  constexpr GpuMemory kDevice = GpuMemory::kDeviceLocal;
  GpuBuffer& latents = ensure(expanded_rows_, most * width * 4, kDevice);
  GpuBuffer& up = ensure(expanded_up_, most * up_row * 4, kDevice);
  GpuBuffer& k = ensure(expanded_k_, heads * most * hd * 4, kDevice);
  GpuBuffer& v = ensure(expanded_v_, heads * most * value * 4, kDevice);
  GpuBuffer& table = upload(expanded_table_, std::vector<uint32_t>(a.sequences.size(), 0));  // every sequence: block 0
  for (const Expansion& e : expansions) {
    const uint32_t slots = a.sequences[e.sequence].num_cached;
    check(ops_->kv_read(storage.format().k, 1, 0, rows, *gb.tables, e.sequence * gb.max_blocks, slots, latents),
          "reading the latents back");
    for (const GpuMatrixPart& part : w.kv_b.parts) {
      check(ops_->matvec(w.kv_b.type, *part.buffer, latents, up, part.rows, w.kv_b.cols, slots, up_row, part.first_row,
                         width, 0),
            "expanding the latents");
    }
    // K_h[s] = [up[s][h][0:nope] | k_pe[s]], V_h[s] = up[s][h][nope:]: heads lie slots rows apart (one block).
    check(ops_->copy_rows(up, {.stride = up_row, .head_stride = nope + value, .offset = 0}, k,
                          {.stride = hd, .head_stride = slots * hd, .offset = 0}, slots, static_cast<uint32_t>(heads),
                          nope),
          "building the expanded keys");
    check(ops_->copy_rows(latents, {.stride = width, .head_stride = 0, .offset = r}, k,
                          {.stride = hd, .head_stride = slots * hd, .offset = nope}, slots,
                          static_cast<uint32_t>(heads), rope),
          "building the expanded keys");
    check(ops_->copy_rows(up, {.stride = up_row, .head_stride = nope + value, .offset = nope}, v,
                          {.stride = value, .head_stride = slots * value, .offset = 0}, slots,
                          static_cast<uint32_t>(heads), value),
          "building the expanded values");
    const KvTensorFormat key{.element = KvDType::kF32, .width = hd, .rows = slots};
    const KvTensorFormat values{.element = KvDType::kF32, .width = value, .rows = slots};
    const GpuOps::AttentionShape shape{.heads = static_cast<uint32_t>(heads),
                                       .kv_heads = static_cast<uint32_t>(heads),
                                       .head_dim = hd,
                                       .value_width = value,
                                       .block_size = slots,
                                       .max_blocks = 1,
                                       .max_slots = gb.max_slots,
                                       .scale = c.attention_scale,
                                       .window = batch.layers->attention_window[l],
                                       .first_token = e.first_token};
    check(ops_->paged_attention(key, values, *q_, k, v, table, *gb.tokens, scores, att, e.tokens, shape),
          "in expanded attention");
  }
}

}  // namespace kvs
