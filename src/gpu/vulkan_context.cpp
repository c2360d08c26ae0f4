#include "gpu/vulkan_context.h"

#include <algorithm>
#include <vector>

namespace kvs {

Expected<std::unique_ptr<VulkanContext>> VulkanContext::create(size_t index) {
  auto devices = list_gpu_devices();
  if (!devices) return devices.status();
  if (index >= devices->size()) {
    return Status::not_found(fmt::format("no Vulkan device {}: this machine has {}", index, devices->size()));
  }
  auto instance = VulkanInstance::process();
  if (!instance) return instance.status();
  std::unique_ptr<VulkanContext> context(new VulkanContext());
  context->instance_ = *instance;
  context->info_ = (*devices)[index];
  context->physical_ = context->instance_->physical_devices().at(index);

  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(context->physical_, &families, nullptr);
  std::vector<VkQueueFamilyProperties> queues(families);
  vkGetPhysicalDeviceQueueFamilyProperties(context->physical_, &families, queues.data());
  uint32_t family = families;
  for (uint32_t f = 0; f < families && family == families; ++f) {
    if (queues[f].queueFlags & VK_QUEUE_COMPUTE_BIT) family = f;
  }
  if (family == families) {
    return Status::unimplemented(fmt::format("Vulkan device {} ({}) has no compute queue", index, context->info_.name));
  }
  context->family_ = family;
  context->timestamp_bits_ = queues[family].timestampValidBits;
  VkPhysicalDeviceProperties properties;
  vkGetPhysicalDeviceProperties(context->physical_, &properties);
  context->timestamp_period_ = properties.limits.timestampPeriod;
  context->memory_budget_ = gpu_device_has_extension(context->physical_, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  // A second queue of the compute family carries the transfers where there is one (they need no ownership moves
  // between families: every buffer is the family's).
  const uint32_t num_queues = std::min<uint32_t>(queues[family].queueCount, 2);
  const float priorities[2] = {1.0f, 1.0f};
  const VkDeviceQueueCreateInfo queue_info{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                           .queueFamilyIndex = family,
                                           .queueCount = num_queues,
                                           .pQueuePriorities = priorities};
  // What the shaders use (kvserve devices lists it), each refused by name where the device lacks it, and enabled.
  const GpuDeviceInfo& d = context->info_;
  const std::pair<bool, const char*> needs[] = {{d.api_version >= VK_API_VERSION_1_2, "Vulkan 1.2"},
                                                {d.storage_16bit, "16-bit storage (storageBuffer16BitAccess)"},
                                                {d.storage_8bit, "8-bit storage (storageBuffer8BitAccess)"},
                                                {d.shader_int8, "int8 arithmetic in shaders (shaderInt8)"},
                                                {d.shader_int16, "int16 arithmetic in shaders (shaderInt16)"},
                                                {d.subgroup_arithmetic, "subgroup arithmetic in compute shaders"}};
  for (const auto& [present, feature] : needs) {
    if (!present) {
      return Status::unimplemented(
          fmt::format("Vulkan device {} ({}) lacks {}, which kvserve's shaders need", index, d.name, feature));
    }
  }
  VkPhysicalDeviceVulkan12Features on12{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                        .storageBuffer8BitAccess = VK_TRUE,
                                        .shaderInt8 = VK_TRUE,
                                        .timelineSemaphore = VK_TRUE};
  VkPhysicalDeviceVulkan11Features on11{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                        .pNext = &on12,
                                        .storageBuffer16BitAccess = VK_TRUE};
  VkPhysicalDeviceFeatures2 on{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &on11};
  on.features.shaderInt16 = VK_TRUE;
  const VkDeviceCreateInfo device_info{.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                       .pNext = &on,
                                       .queueCreateInfoCount = 1,
                                       .pQueueCreateInfos = &queue_info};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateDevice(context->physical_, &device_info, nullptr, &context->device_), "vkCreateDevice"));
  vkGetDeviceQueue(context->device_, family, 0, &context->queue_);
  vkGetDeviceQueue(context->device_, family, num_queues - 1, &context->transfer_queue_);
  VkSemaphoreTypeCreateInfo timeline{.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                     .initialValue = 0};
  const VkSemaphoreCreateInfo semaphore_info{.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &timeline};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateSemaphore(context->device_, &semaphore_info, nullptr, &context->transfer_timeline_),
               "vkCreateSemaphore"));
  const VkCommandPoolCreateInfo pool_info{.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                          .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                          .queueFamilyIndex = family};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateCommandPool(context->device_, &pool_info, nullptr, &context->pool_), "vkCreateCommandPool"));
  const VkFenceCreateInfo fence_info{.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateFence(context->device_, &fence_info, nullptr, &context->fence_), "vkCreateFence"));
  return context;
}

VulkanContext::~VulkanContext() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (transfer_timeline_ != VK_NULL_HANDLE) vkDestroySemaphore(device_, transfer_timeline_, nullptr);
    if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
}

Expected<uint32_t> VulkanContext::memory_type(uint32_t allowed, VkMemoryPropertyFlags required) const {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
  for (uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    if ((allowed >> t & 1) && (memory.memoryTypes[t].propertyFlags & required) == required) return t;
  }
  return Status::unimplemented(
      fmt::format("Vulkan device {} has no memory type with properties {:#x}", info_.name, required));
}

bool VulkanContext::memory_is_device_local(uint32_t type) const {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
  return type < memory.memoryTypeCount &&
         (memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
}

uint64_t VulkanContext::device_memory_available() const {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{.sType =
                                                       VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 memory{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                           .pNext = memory_budget_ ? &budget : nullptr};
  vkGetPhysicalDeviceMemoryProperties2(physical_, &memory);
  uint64_t best = 0;
  for (uint32_t h = 0; h < memory.memoryProperties.memoryHeapCount; ++h) {
    if (!(memory.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    const uint64_t size = memory.memoryProperties.memoryHeaps[h].size;
    const uint64_t free =
        memory_budget_ ? (budget.heapBudget[h] > budget.heapUsage[h] ? budget.heapBudget[h] - budget.heapUsage[h] : 0)
                       : (size > device_allocated_ ? size - device_allocated_ : 0);
    best = std::max(best, free);
  }
  return best;
}

Expected<VkCommandBuffer> VulkanContext::record_commands(const std::function<void(VkCommandBuffer)>& record) {
  const VkCommandBufferAllocateInfo allocate{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                             .commandPool = pool_,
                                             .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                             .commandBufferCount = 1};
  VkCommandBuffer commands = VK_NULL_HANDLE;
  KVS_RETURN_IF_ERROR(vk_check(vkAllocateCommandBuffers(device_, &allocate, &commands), "vkAllocateCommandBuffers"));
  const VkCommandBufferBeginInfo begin{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  Status status = vk_check(vkBeginCommandBuffer(commands, &begin), "vkBeginCommandBuffer");
  if (status) {
    record(commands);
    status = vk_check(vkEndCommandBuffer(commands), "vkEndCommandBuffer");
  }
  if (!status) {
    vkFreeCommandBuffers(device_, pool_, 1, &commands);
    return status;
  }
  return commands;
}

void VulkanContext::free_transfers_done(uint64_t done) {
  std::erase_if(transfers_in_flight_, [&](const std::pair<uint64_t, VkCommandBuffer>& t) {
    if (t.first > done) return false;
    vkFreeCommandBuffers(device_, pool_, 1, &t.second);
    return true;
  });
}

Status VulkanContext::run(const std::function<void(VkCommandBuffer)>& record, bool* submitted) {
  if (submitted != nullptr) *submitted = false;
  const std::lock_guard lock(pool_mutex_);
  auto commands = record_commands(record);
  if (!commands) return commands.status();
  const Status status = submit_and_wait(*commands, submitted);
  vkFreeCommandBuffers(device_, pool_, 1, &*commands);
  return status;
}

Status VulkanContext::submit_and_wait(VkCommandBuffer commands, bool* submitted) {
  const std::lock_guard lock(submit_mutex_);
  // The transfers it depends on are done before its commands run (a timeline wait on the device).
  const uint64_t wait_value = required_transfers_;
  const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  const VkTimelineSemaphoreSubmitInfo timeline{.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                               .waitSemaphoreValueCount = 1,
                                               .pWaitSemaphoreValues = &wait_value};
  const bool waits = wait_value > 0;
  const VkSubmitInfo submit{.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                            .pNext = waits ? &timeline : nullptr,
                            .waitSemaphoreCount = waits ? 1u : 0u,
                            .pWaitSemaphores = &transfer_timeline_,
                            .pWaitDstStageMask = &wait_stage,
                            .commandBufferCount = 1,
                            .pCommandBuffers = &commands};
  Status status = vk_check(vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
  if (submitted != nullptr) *submitted = status.is_ok();
  if (status) status = vk_check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  vkResetFences(device_, 1, &fence_);
  return status;
}

Expected<uint64_t> VulkanContext::submit_transfer(const std::function<void(VkCommandBuffer)>& record) {
  const std::lock_guard pool_lock(pool_mutex_);
  // Command buffers of the transfers done by now go back first.
  uint64_t done = 0;
  KVS_RETURN_IF_ERROR(
      vk_check(vkGetSemaphoreCounterValue(device_, transfer_timeline_, &done), "vkGetSemaphoreCounterValue"));
  free_transfers_done(done);
  auto recorded = record_commands(record);
  if (!recorded) return recorded.status();
  VkCommandBuffer commands = *recorded;
  Status status = Status::ok();
  uint64_t value = 0;
  {
    const std::lock_guard lock(submit_mutex_);
    value = transfer_value_ + 1;
    const VkTimelineSemaphoreSubmitInfo timeline{.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                                 .signalSemaphoreValueCount = 1,
                                                 .pSignalSemaphoreValues = &value};
    const VkSubmitInfo submit{.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                              .pNext = &timeline,
                              .commandBufferCount = 1,
                              .pCommandBuffers = &commands,
                              .signalSemaphoreCount = 1,
                              .pSignalSemaphores = &transfer_timeline_};
    status = vk_check(vkQueueSubmit(transfer_queue_, 1, &submit, VK_NULL_HANDLE), "vkQueueSubmit");
    if (status) transfer_value_ = value;
  }
  if (!status) {
    vkFreeCommandBuffers(device_, pool_, 1, &commands);
    return status;
  }
  transfers_in_flight_.emplace_back(value, commands);
  return value;
}

void VulkanContext::require_transfers(uint64_t value) {
  const std::lock_guard lock(submit_mutex_);
  required_transfers_ = std::max(required_transfers_, value);
}

Status VulkanContext::wait_transfers(uint64_t value) {
  if (value == 0) return Status::ok();
  const VkSemaphoreWaitInfo wait{.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                 .semaphoreCount = 1,
                                 .pSemaphores = &transfer_timeline_,
                                 .pValues = &value};
  KVS_RETURN_IF_ERROR(vk_check(vkWaitSemaphores(device_, &wait, UINT64_MAX), "vkWaitSemaphores"));
  const std::lock_guard pool_lock(pool_mutex_);
  free_transfers_done(value);
  return Status::ok();
}

}  // namespace kvs
