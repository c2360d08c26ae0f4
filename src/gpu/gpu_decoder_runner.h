// One engine's forward pass on the GPU, op for op as the CPU's LlamaForward, Gemma3Forward and Deepseek2Forward
// compute it: embedding rows (scaled by sqrt(dim) for Gemma), per layer RMSNorm, attention (gpu_decoder_runner.cpp:
// Q/K/V (+ biases; Gemma: an RMSNorm of each query and key head), RoPE by the host's angle tables (Gemma's window
// layers by their own), the KV write into the engine's KvStorage (whose pools live in the device's mapped memory:
// VulkanKvAllocator), paged attention over the batch's block tables; or MLA's latent cache in its absorbed and
// expanded forms, gpu_decoder_runner_mla.cpp), the output projection (Gemma: normed) and the residual, RMSNorm, the FFN
// (SwiGLU; Gemma: GeGLU; DeepSeek-V2: a mixture of experts routed on the device) and the residual; then the final norm
// of the rows whose logits are wanted, the output matrix, and the logits copied back. Per step the host uploads only
// metadata (token ids, angles, slots, block tables, visible slots); the step is one submission, or under tensor
// parallelism one between each sum over the ranks.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "gpu/gpu_decoder_model.h"

namespace kvs {

class GpuDecoderRunner final : public ModelRunner {
 public:
  // mla_form: MLA's attention form (model.h's MlaForm: absorbed, expanded, or expanded for a sequence bringing
  // kMlaExpandFromTokens tokens or more to a step).
  GpuDecoderRunner(const GpuDecoderModel& model, MlaForm mla_form);
  void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) override;
  double communication_seconds() const override { return communication_seconds_; }
  uint64_t num_collectives() const override { return num_collectives_; }

 private:
  // A buffer of at least `bytes` in `slot` (reallocated when smaller): device-local, or host-visible when mapped.
  GpuBuffer& ensure(std::unique_ptr<GpuBuffer>& slot, size_t bytes, GpuMemory memory);
  // Copies `values` into the host-visible buffer `slot`, grown as needed.
  template <class T>
  GpuBuffer& upload(std::unique_ptr<GpuBuffer>& slot, const std::vector<T>& values);
  // y = W x for n rows of x.
  void matvec(const GpuMatrix& w, GpuBuffer& x, GpuBuffer& y, size_t n);
  // The device buffer of layer `layer`'s K (keys) or V pool in `storage`.
  GpuBuffer& pool(const KvStorage& storage, size_t layer, bool keys) const;
  // Throws DeviceFault naming `what` and the status when it is an error, the step's recording dropped.
  void check(const Status& s, const char* what);

  const GpuDecoderModel& model_;
  MlaForm mla_form_;
  // Under tensor parallelism (a shard of N > 1 ranks): this rank's communicator; the partial sums of the output and
  // down projections are summed over the ranks between two submissions, and the logits' vocabulary slices gathered
  // to rank 0.
  Communicator* tp_ = nullptr;
  std::vector<float> partial_, local_logits_, gathered_logits_;
  double communication_seconds_ = 0.0;
  uint64_t num_collectives_ = 0;
  void sum_over_ranks(GpuBuffer& y, size_t n);
  void timed(const std::function<void()>& collective);
  std::unique_ptr<GpuOps> ops_;  // this runner's pipelines (their descriptor sets are per runner)
  std::unique_ptr<GpuBuffer> x_, xb_, q_, k_, v_, att_, proj_, gate_, up_, scores_, final_, normed_, logits_;
  std::unique_ptr<GpuBuffer> ids_, wanted_;
  // DeepSeek-V2: q_a [n][q_lora], latent rows [n][r + rope], absorbed queries [n][H][r + rope] and outputs [n][H][r];
  // the router's logits [n][E], each token's k experts and weights, their hidden states [n][k][f] and outputs
  // [n][k][dim].
  std::unique_ptr<GpuBuffer> q_a_, latent_, q_latent_, out_latent_;
  // MLA's expanded form, a sequence at a time: its latents read back [slots][r + rope], their up-projection
  // [slots][H][nope + value], per-head K [H][slots][head_dim] and V [H][slots][value] as one block of an f32 pool, and
  // a block table mapping every sequence to that block.
  std::unique_ptr<GpuBuffer> expanded_rows_, expanded_up_, expanded_k_, expanded_v_, expanded_table_;
  // Layer l's expanded form for the sequences that take it (the others' att rows are the absorbed form's).
  struct Expansion {
    uint32_t sequence = 0, first_token = 0, tokens = 0;
  };
  std::vector<Expansion> plan_expansions(const AttentionBatch& a, size_t block_size) const;
  void absorbed_attention(const GpuLayerWeights& w, const ForwardBatch& batch, size_t l, const KvFormat& format,
                          GpuBuffer& q, GpuBuffer& rows, GpuBuffer& scores, GpuBuffer& att);
  void mla_expanded(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv, size_t l,
                    std::span<const Expansion> expansions, GpuBuffer& scores, GpuBuffer& att);
  std::unique_ptr<GpuBuffer> router_logits_, expert_ids_, expert_weights_, expert_gate_, expert_up_, expert_out_;
  struct RopeBuffers {
    std::unique_ptr<GpuBuffer> cos, sin;  // [tokens][half]
  };
  RopeBuffers global_rope_, local_rope_;  // local: Gemma 3's window layers
  // The angles of `positions` by `inv_freq` into `to`'s host-visible buffers.
  RopeBuffers& upload_rope(RopeBuffers& to, std::span<const float> inv_freq, std::span<const uint32_t> positions);
  // x += y, or x += rmsnorm(y) by `norm` (Gemma's post-norms) through `scratch`, over `tokens` rows of dim.
  void add_to_residual(GpuBuffer& x, GpuBuffer& y, GpuBuffer* norm, GpuBuffer& scratch, uint32_t tokens);
  // The device buffer of `storage`'s key tails (keys per channel).
  GpuBuffer& key_tails(const KvStorage& storage) const;
  // A sequence's SlotMass and where its [layer][kv_head][slot] sums start in its group's mass buffer (pairs).
  struct MassTarget {
    SlotMass mass;
    uint32_t first_pair = 0, slots = 0, layers = 0, heads = 0;  // heads: this rank's KV heads
  };
  struct GroupBuffers {
    std::unique_ptr<GpuBuffer> slots, tables, tokens;
    std::unique_ptr<GpuBuffer> tail_of_token, seals, sequence_tails;  // keys per channel (gpu/key_groups.h)
    uint32_t max_blocks = 0, max_slots = 0, num_seals = 0;
    // H2O: the sequences whose attention mass the step sums (slot_mass.comp), their tokens and the sums.
    std::unique_ptr<GpuBuffer> mass_sequences, mass_tokens, mass;  // mass: host-visible (lo, hi) pairs
    std::vector<MassTarget> mass_targets;
    uint32_t mass_slots = 0;  // the most slots one of them holds
  };
  // Layer l's attention from its normed input xb into att [tokens][heads x value], through the scratch `scores`:
  // the Llama family's and Gemma's (RoPE by `rope`), or MLA's absorbed form (gpu_decoder_runner_mla.cpp).
  void attention(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv, size_t l, GpuBuffer& xb,
                 GpuBuffer& scores, GpuBuffer& att, RopeBuffers& rope);
  void mla_attention(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv, size_t l,
                     GpuBuffer& xb, GpuBuffer& scores, GpuBuffer& att);
  // A mixture of experts' FFN of xb's n rows into out (gpu_decoder_runner_mla.cpp).
  void moe_ffn(const GpuLayerWeights& w, GpuBuffer& xb, GpuBuffer& out, size_t n);
  // H2O's mass of the sequences that want it, from the attention just recorded.
  void sum_slot_mass(GroupBuffers& gb, GpuBuffer& scores, const GpuOps::AttentionShape& shape, size_t layer);
  // The mass slot_mass.comp sums for it into a sequence's SlotMass rows after the step.
  void plan_slot_mass(const AttentionBatch& a, const KvFormat& format, GroupBuffers& gb);
  void add_slot_mass(const GroupBuffers& gb) const;
  std::vector<GroupBuffers> groups_;
  std::vector<float> inv_freq_, local_inv_freq_;  // local_: Gemma 3's window layers (empty otherwise)
};

}  // namespace kvs
