// A compute pipeline from embedded SPIR-V (RAII): its storage-buffer bindings 0..N-1 in one descriptor set layout, push
// constants, and specialization constants fixed at creation (shapes: workgroup size, row widths).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "gpu/gpu_buffer.h"

namespace kvs {

class ComputePipeline {
 public:
  // spirv: the shader's words; `bindings` storage buffers; push_bytes of push constants (0: none);
  // specialization[i] is constant_id i.
  static Expected<std::unique_ptr<ComputePipeline>> create(VulkanContext& context, std::span<const uint32_t> spirv,
                                                           uint32_t bindings, uint32_t push_bytes,
                                                           std::span<const uint32_t> specialization = {});
  ~ComputePipeline();
  ComputePipeline(const ComputePipeline&) = delete;
  ComputePipeline& operator=(const ComputePipeline&) = delete;

  // Dispatches over descriptor sets of the caller's (allocated with set_layout(), written with write()): many
  // dispatches of one pipeline over different buffers in one command buffer (gpu_recorder.h).
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  uint32_t bindings() const { return bindings_; }
  void write(VkDescriptorSet set, std::span<GpuBuffer* const> buffers) const;
  void record(VkCommandBuffer commands, VkDescriptorSet set, const void* push, uint32_t groups_x,
              uint32_t groups_y) const;

 private:
  explicit ComputePipeline(VulkanContext& context) : context_(context) {}
  VulkanContext& context_;
  uint32_t bindings_ = 0, push_bytes_ = 0;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace kvs
