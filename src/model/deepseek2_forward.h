// The DeepSeek-V2 forward pass over a batch of tokens: per layer RMSNorm; queries (directly, or through the low-rank
// pair and its norm) of H heads [nope | rope]; the latent c = norm(x W_kv_a[:r]) and the key's RoPE part
// k_pe = rope(x W_kv_a[r:]), stored as one row [c | k_pe] per token (the MLA cache); attention; the output
// projection; then a dense SwiGLU FFN (leading layers) or the experts (model/moe_ffn.h). RoPE is interleaved, YaRN
// when the file says so, and scores are scaled by DeepSeek's mscale^2 / sqrt(head_dim).
//
// Attention has two exact forms (equal up to rounding, tested against each other and a naive reference):
// - absorbed: q_lat[h] = [W_kb[h]^T q_nope[h] | q_pe[h]] attends over the latent rows themselves as MQA with one
//   KV head of width r + rope, and head h's output is W_vb[h] (its attention-weighted latent): decode never builds
//   per-head K or V. Cost per token and cached slot: 2 x H x (r + rope) multiply-adds.
// - expanded: each sequence's cached latents are expanded to per-head K = [W_kb c | k_pe] and V = W_vb c, and its
//   tokens attend over those as MHA, per head as two matrix products (scores = K Q^T, out = V^T P). Cost:
//   H x (nope + value) x r per cached slot once per step, plus H x (head_dim + value) per token and slot: fewer
//   operations when a sequence brings many tokens at once (prefill).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "attention/latent_bf16_attention.h"
#include "model/decoder_forward.h"
#include "model/decoder_model.h"
#include "model/moe_ffn.h"

namespace kvs {

class Deepseek2Forward final : public DecoderForward {
 public:
  Deepseek2Forward(const DecoderModel& model, ThreadPool& pool, MlaForm form);

  void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) override;

 private:
  bool kv_matches(const KvCacheSpec& spec) const override;
  // att_[t] = attention output of token t, [H][value], in the form `form_` chooses per sequence.
  void attention(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer);
  void attend_absorbed(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer,
                       std::span<const uint32_t> tokens);
  void attend_expanded(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer,
                       std::span<const uint32_t> tokens);
  // y[t][h] = w_of(h) . x[t][h] for every head h: x rows lie x_stride apart, head h's input at column x_offset +
  // h * x_head_stride; y is [m][H][y_head_stride], head h's output at its column 0.
  void per_head_matmul(const std::function<WeightView(size_t)>& w_of, std::span<const float> x, size_t m,
                       size_t x_stride, size_t x_head_stride, size_t x_offset, std::span<float> y,
                       size_t y_head_stride);

  MlaForm form_;
  Rope rope_;
  float absorbed_query_scale_;       // the kernel divides by sqrt(its head width); this makes it attention_scale
  BatchAttention latent_attention_;  // H query heads over one latent "KV head" of r + rope
  LatentBf16Attention latent_bf16_;  // the same with bf16 products (AMX or vdpbf16ps), where it applies
  MoeFfn moe_;
  std::vector<float> q_a_;     // [n][q_lora_rank]
  std::vector<float> latent_;  // [n][r + rope]: the rows the cache stores
  std::vector<uint32_t> absorbed_tokens_, expanded_tokens_;
  // Absorbed form, for its m tokens: queries and outputs [m][H][r + rope].
  std::vector<float> q_latent_, out_latent_;
  // Expanded form, one sequence at a time: its latents read back [slots][r + rope], c alone [slots][r], their K/V
  // up-projection [slots][H][nope + value]; per head K [slots][head_dim], V^T [value][slots], the tokens' queries
  // [m][head_dim], scores then probabilities [m][slots].
  std::vector<float> rows_, c_, kv_up_, k_rows_, v_rows_, scores_;
  // Both forms: gathered queries and outputs of their tokens.
  std::vector<float> q_sub_, out_sub_;
  std::vector<uint32_t> sub_tokens_, sub_sequence_of_token_, sub_visible_;
};

}  // namespace kvs
