// DeepSeek-V2 on the GPU: MLA's attention in absorbed form and the mixture of experts (model/deepseek2_forward.h's
// and model/moe_ffn.h's, op for op).
#include <algorithm>
#include <cmath>

#include "gpu/gpu_decoder_runner.h"

namespace kvs {

// Queries (directly, or through q_a, its norm and q_b) of H heads [nope | rope]; the latent row [c | k_pe] of each
// token: c = norm(x W_kv_a[:r]), k_pe = rope(x W_kv_a[r:]), stored in the cache (one row a token, one "KV head");
// the absorbed queries [W_kb[h]^T q_nope[h] | q_pe[h]] attend over the latent rows as MQA, the values being their
// first r; head h's output is W_vb[h] times its attention-weighted latent. Decode never builds per-head K or V.
void GpuDecoderRunner::mla_attention(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv,
                                     size_t l, GpuBuffer& xb, GpuBuffer& scores, GpuBuffer& att) {
  const ModelConfig& c = model_.config();
  const MlaConfig& mla = c.mla;
  const size_t n = batch.tokens.size(), heads = c.num_heads;
  const uint32_t tokens = static_cast<uint32_t>(n), hd = static_cast<uint32_t>(c.head_dim);
  const uint32_t r = static_cast<uint32_t>(mla.kv_lora_rank), width = static_cast<uint32_t>(c.latent_width());
  const uint32_t nope = static_cast<uint32_t>(mla.nope_dim), rope = static_cast<uint32_t>(c.rope_dim);
  const uint32_t value = static_cast<uint32_t>(mla.value_dim), half = static_cast<uint32_t>(inv_freq_.size());
  constexpr GpuMemory kDevice = GpuMemory::kDeviceLocal;
  GpuBuffer& q = *q_;
  GpuBuffer& latent = ensure(latent_, n * width * 4, kDevice);
  GpuBuffer& q_latent = ensure(q_latent_, n * heads * width * 4, kDevice);
  GpuBuffer& out_latent = ensure(out_latent_, n * heads * r * 4, kDevice);
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
                                     .block_size = static_cast<uint32_t>(storage.block_size()),
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
  const ModelConfig& c = model_.config();
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

}  // namespace kvs
