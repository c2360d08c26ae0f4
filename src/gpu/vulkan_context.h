// One Vulkan device opened for compute (RAII): the instance, the chosen physical device, a logical device with one
// compute queue, and a command pool; run() records a command buffer, submits it and waits for it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "gpu/gpu_devices.h"
#include "gpu/vulkan_instance.h"

namespace kvs {

class VulkanContext {
 public:
  // Device `index` of list_gpu_devices(); an error naming the index and the devices there are when it is out of range.
  static Expected<std::unique_ptr<VulkanContext>> create(size_t index);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  const GpuDeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  // A memory type index with all of `required` among the types `allowed` (a bit per type), or an error.
  Expected<uint32_t> memory_type(uint32_t allowed, VkMemoryPropertyFlags required) const;

  // Records `record` into a fresh command buffer, submits it and waits for the queue (a lost device is an error).
  // One submission at a time: callers on several threads (engines sharing the device) take turns.
  Status run(const std::function<void(VkCommandBuffer)>& record);

 private:
  VulkanContext() = default;
  std::unique_ptr<VulkanInstance> instance_;
  GpuDeviceInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::mutex submit_mutex_;  // guards the pool, the queue and the fence
};

}  // namespace kvs
