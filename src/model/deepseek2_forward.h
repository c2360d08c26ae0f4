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
// - expanded: each sequence's cached latents are expanded to per-head K = [W_kb c | k_pe] and V = W_vb c, and the
//   queries attend over those as MHA. Cost: H x (nope + value) x r per cached slot once per step, plus
//   H x (head_dim + value) per token and slot: cheaper when a sequence brings many tokens at once (prefill).
#pragma once

#include <functional>
#include <memory>
#include <vector>

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
  float absorbed_query_scale_, expanded_query_scale_;  // the kernel divides by sqrt(its head width); these undo it
  BatchAttention latent_attention_;                    // H query heads over one latent "KV head" of r + rope
  BatchAttention expanded_attention_;                  // H heads of key head_dim and value width
  MoeFfn moe_;
  std::vector<float> q_a_;     // [n][q_lora_rank]
  std::vector<float> latent_;  // [n][r + rope]: the rows the cache stores
  std::vector<uint32_t> absorbed_tokens_, expanded_tokens_;
  // Absorbed form, for its m tokens: queries and outputs [m][H][r + rope].
  std::vector<float> q_latent_, out_latent_;
  // Expanded form: the expanded sequences' K/V in a contiguous fp32 cache (block i: expanded sequence i), their
  // latents read back [slots][r + rope] and split, their K/V up-projection [slots][H][nope + value].
  std::unique_ptr<KvStorage> expanded_kv_;
  std::vector<float> rows_, c_, kv_up_, k_rows_, v_rows_, q_sub_, out_sub_;
  std::vector<SequenceAttention> sub_sequences_;
  std::vector<BlockId> sub_blocks_;
  std::vector<uint32_t> sub_sequence_of_token_, sub_visible_, sequence_map_;
};

}  // namespace kvs
