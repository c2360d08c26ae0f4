// One engine's forward pass of the Llama family on the GPU (the CPU's LlamaForward, op for op): embedding rows,
// per layer RMSNorm, Q/K/V (+ biases), RoPE by the host's angle tables, the KV write into the engine's KvStorage
// (whose pools live in the device's mapped memory: VulkanKvAllocator), paged attention over the batch's block tables,
// the output projection and the residual, RMSNorm, SwiGLU, the down projection and the residual; then the final norm
// of the rows whose logits are wanted, the output matrix, and the logits copied back. Per step the host uploads only
// metadata (token ids, angles, slots, block tables, visible slots). Each operation is its own submission for now
// (speed is issue 44's).
#pragma once

#include <memory>
#include <vector>

#include "gpu/gpu_llama_model.h"

namespace kvs {

class GpuLlamaRunner final : public ModelRunner {
 public:
  explicit GpuLlamaRunner(const GpuLlamaModel& model);
  void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) override;

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

  const GpuLlamaModel& model_;
  std::unique_ptr<GpuOps> ops_;  // this runner's pipelines (their descriptor sets are per runner)
  std::unique_ptr<GpuBuffer> x_, xb_, q_, k_, v_, att_, proj_, gate_, up_, scores_, final_, normed_, logits_;
  std::unique_ptr<GpuBuffer> ids_, cos_, sin_, wanted_;
  // The device buffer of `storage`'s key tails (keys per channel).
  GpuBuffer& key_tails(const KvStorage& storage) const;
  struct GroupBuffers {
    std::unique_ptr<GpuBuffer> slots, tables, tokens;
    std::unique_ptr<GpuBuffer> tail_of_token, seals, sequence_tails;  // keys per channel (gpu/key_groups.h)
    uint32_t max_blocks = 0, max_slots = 0, num_seals = 0;
  };
  std::vector<GroupBuffers> groups_;
  std::vector<float> inv_freq_;
};

}  // namespace kvs
