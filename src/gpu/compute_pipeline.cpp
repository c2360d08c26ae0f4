#include "gpu/compute_pipeline.h"

#include <vector>

namespace kvs {

Expected<std::unique_ptr<ComputePipeline>> ComputePipeline::create(VulkanContext& context,
                                                                   std::span<const uint32_t> spirv, uint32_t bindings,
                                                                   uint32_t push_bytes,
                                                                   std::span<const uint32_t> specialization) {
  std::unique_ptr<ComputePipeline> p(new ComputePipeline(context));
  p->bindings_ = bindings;
  p->push_bytes_ = push_bytes;
  const VkDevice device = context.device();
  const VkShaderModuleCreateInfo module_info{
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = spirv.size_bytes(), .pCode = spirv.data()};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateShaderModule(device, &module_info, nullptr, &p->module_), "vkCreateShaderModule"));
  std::vector<VkDescriptorSetLayoutBinding> layout_bindings;
  for (uint32_t b = 0; b < bindings; ++b) {
    layout_bindings.push_back({.binding = b,
                               .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = 1,
                               .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT});
  }
  const VkDescriptorSetLayoutCreateInfo set_info{.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                 .bindingCount = bindings,
                                                 .pBindings = layout_bindings.data()};
  KVS_RETURN_IF_ERROR(vk_check(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &p->set_layout_),
                               "vkCreateDescriptorSetLayout"));
  const VkPushConstantRange push{.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = push_bytes};
  const VkPipelineLayoutCreateInfo layout_info{.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                               .setLayoutCount = 1,
                                               .pSetLayouts = &p->set_layout_,
                                               .pushConstantRangeCount = push_bytes > 0 ? 1u : 0u,
                                               .pPushConstantRanges = &push};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreatePipelineLayout(device, &layout_info, nullptr, &p->layout_), "vkCreatePipelineLayout"));
  std::vector<VkSpecializationMapEntry> entries;
  for (uint32_t i = 0; i < specialization.size(); ++i) {
    entries.push_back({.constantID = i, .offset = i * 4u, .size = 4});
  }
  const VkSpecializationInfo constants{.mapEntryCount = static_cast<uint32_t>(entries.size()),
                                       .pMapEntries = entries.data(),
                                       .dataSize = specialization.size_bytes(),
                                       .pData = specialization.data()};
  const VkComputePipelineCreateInfo pipeline_info{
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = p->module_,
                .pName = "main",
                .pSpecializationInfo = &constants},
      .layout = p->layout_};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &p->pipeline_),
               "vkCreateComputePipelines"));
  return p;
}

ComputePipeline::~ComputePipeline() {
  const VkDevice device = context_.device();
  if (pipeline_ != VK_NULL_HANDLE) vkDestroyPipeline(device, pipeline_, nullptr);
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device, set_layout_, nullptr);
  if (module_ != VK_NULL_HANDLE) vkDestroyShaderModule(device, module_, nullptr);
}

void ComputePipeline::write(VkDescriptorSet set, std::span<GpuBuffer* const> buffers) const {
  KVS_ASSERT(buffers.size() == bindings_, "a pipeline of {} bindings given {} buffers", bindings_, buffers.size());
  std::vector<VkDescriptorBufferInfo> infos;
  for (const GpuBuffer* b : buffers) infos.push_back({.buffer = b->handle(), .offset = 0, .range = VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes;
  for (uint32_t b = 0; b < bindings_; ++b) {
    writes.push_back({.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                      .dstSet = set,
                      .dstBinding = b,
                      .descriptorCount = 1,
                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                      .pBufferInfo = &infos[b]});
  }
  vkUpdateDescriptorSets(context_.device(), bindings_, writes.data(), 0, nullptr);
}

void ComputePipeline::record(VkCommandBuffer commands, VkDescriptorSet set, const void* push, uint32_t groups_x,
                             uint32_t groups_y) const {
  vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  vkCmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set, 0, nullptr);
  if (push_bytes_ > 0) vkCmdPushConstants(commands, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  vkCmdDispatch(commands, groups_x, groups_y, 1);
}

}  // namespace kvs
