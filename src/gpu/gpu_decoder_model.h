// The decoders of the Llama family (llama, qwen2), Gemma 3 and DeepSeek-V2 (MLA, experts) on a Vulkan device
// (gpu_model.h's make_gpu_model): the weights on the device in their file's types, one runner per engine
// (gpu_decoder_runner.h) recording the forward pass with GpuOps.
#pragma once

#include <memory>
#include <vector>

#include "gpu/gpu_model.h"
#include "gpu/gpu_ops.h"
#include "gpu/vulkan_kv_allocator.h"

namespace kvs {

// A matrix on the device: its bytes as the file has them, and what they are; in parts of whole rows, each within one
// storage binding of the device (lavapipe's span 128 MiB: a 32k x 2048 F32 classifier is two parts).
struct GpuMatrixPart {
  std::unique_ptr<GpuBuffer> buffer;
  uint32_t first_row = 0, rows = 0;
};
struct GpuMatrix {
  std::vector<GpuMatrixPart> parts;  // in row order, covering rows 0 .. rows - 1
  DType type = DType::kF32;
  uint32_t rows = 0, cols = 0;
};

// A mixture's experts of one kind (gate, up or down), stacked [expert][rows][cols] in parts of whole experts, each
// within one storage binding.
struct GpuExpertPart {
  std::unique_ptr<GpuBuffer> buffer;
  uint32_t first_expert = 0, experts = 0;
};
struct GpuExperts {
  std::vector<GpuExpertPart> parts;
  DType type = DType::kF32;
  uint32_t rows = 0, cols = 0;  // of one expert
};

struct GpuLayerWeights {
  GpuMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  std::unique_ptr<GpuBuffer> attn_norm, ffn_norm, bq, bk, bv;  // biases: null without (qkv_bias false)
  // Gemma 3 only (null otherwise): the norms of each query and key head, and of the attention and FFN outputs.
  std::unique_ptr<GpuBuffer> q_norm, k_norm, post_attention_norm, post_ffw_norm;
  // DeepSeek-V2 only (empty otherwise): MLA's projections (model/decoder_weights.h's MlaLayerWeights; queries through
  // q_a, its norm and q_b, or wq), per head W_kb^T [r][nope] and W_vb [value][r]; a mixture's router, experts and
  // shared experts in MoE layers (the dense FFN above in the leading ones).
  GpuMatrix q_a, q_b, kv_a, kv_b;  // kv_b: [H x (nope + value)][r], the expanded form's up-projection
  std::unique_ptr<GpuBuffer> q_a_norm, kv_a_norm;
  std::vector<GpuMatrix> k_b, v_b;
  GpuMatrix router, shared_gate, shared_up, shared_down;
  GpuExperts gate_exps, up_exps, down_exps;
};

class GpuDecoderModel final : public Model {
 public:
  static Expected<std::unique_ptr<GpuDecoderModel>> create(const DecoderModel& model, size_t device,
                                                           GpuModelOptions options);

  const ModelConfig& config() const override { return host_.config(); }
  // What this rank computes: the config itself, or under tensor parallelism its shard's (its heads, its FFN columns).
  const ModelConfig& shard_config() const { return host_.shard_config(); }
  KvCacheSpec kv_spec(KvDTypes dtype, size_t block_size) const override { return host_.kv_spec(dtype, block_size); }
  uint64_t file_fingerprint() const override { return host_.file_fingerprint(); }
  // Under tensor parallelism: the host shard's (its heads, its vocabulary slice, its rank's communicator).
  size_t tensor_parallel_size() const override { return host_.tensor_parallel_size(); }
  size_t first_kv_head() const override { return host_.first_kv_head(); }
  Communicator* communicator() const override { return host_.communicator(); }
  std::unique_ptr<ModelRunner> make_runner(ThreadPool& pool, MlaForm mla_form) const override;
  KvAllocator* kv_allocator() const override { return allocator_.get(); }
  // Host memory the device's transfers fill and read (vulkan_kv_executor.h moves tier blocks with them).
  KvAllocator* kv_host_tier_allocator() const override { return host_tier_allocator_.get(); }
  // Slot copies and compactions on the device (vulkan_kv_executor.h), the rest by `host` over the mapped bytes.
  std::unique_ptr<KvExecutor> make_kv_executor(std::span<KvStorage> storages,
                                               std::unique_ptr<KvExecutor> host) const override;

  VulkanContext& context() const { return *context_; }
  GpuOps& ops() const { return *ops_; }
  const VulkanKvAllocator& allocator() const { return *allocator_; }
  const std::vector<GpuLayerWeights>& layers() const { return layers_; }
  const GpuMatrix& embedding() const { return embedding_; }
  // The classifier: the embedding itself when the file ties them (uploaded once), unless this is a tensor-parallel
  // shard (its vocabulary slice of the classifier, while every rank looks up the whole embedding).
  const GpuMatrix& output() const { return output_is_embedding() ? embedding_ : output_; }
  bool output_is_embedding() const { return config().tied_output && tensor_parallel_size() == 1; }
  GpuBuffer& output_norm() const { return *output_norm_; }
  size_t device_index() const { return device_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Where runners add their timestamps (--profile), or null.
  GpuProfile* profile() const { return options_.profile ? &profile_ : nullptr; }

 private:
  GpuDecoderModel(const DecoderModel& host, size_t device, GpuModelOptions options)
      : host_(host), device_(device), options_(options) {}
  // The most bytes one storage binding spans on this device (or options_.max_binding_bytes, when smaller).
  size_t binding_range() const;
  Expected<GpuMatrix> upload_matrix(const WeightView& view, const std::string& what);
  Expected<GpuExperts> upload_experts(std::span<const WeightView> experts, const std::string& what);
  Status upload_mla(const DecoderLayerWeights& from, GpuLayerWeights& to, size_t layer);
  Expected<std::unique_ptr<GpuBuffer>> upload_vector(std::span<const float> values);

  const DecoderModel& host_;
  size_t device_;
  GpuModelOptions options_;
  uint64_t weight_bytes_ = 0;
  mutable GpuProfile profile_;
  std::unique_ptr<VulkanContext> context_;
  std::unique_ptr<GpuOps> ops_;
  std::unique_ptr<VulkanKvAllocator> allocator_;
  std::unique_ptr<VulkanKvAllocator> host_tier_allocator_;  // the KV host tier's slabs
  std::vector<GpuLayerWeights> layers_;
  GpuMatrix embedding_, output_;  // output_ empty when output_is_embedding()
  std::unique_ptr<GpuBuffer> output_norm_;
};

}  // namespace kvs
