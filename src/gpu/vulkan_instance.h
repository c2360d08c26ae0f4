// The Vulkan instance (RAII) and VkResult turned into a Status with the call that failed.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <vector>

#include "core/status.h"

namespace kvs {

const char* vk_result_name(VkResult result);
// ok for VK_SUCCESS, else an error "WHAT failed: VK_ERROR_..." (out of memory codes as kOutOfMemory).
Status vk_check(VkResult result, const char* what);
// Records a global memory barrier into `commands`: the writes `from_access` of the work at `from_stage` before it
// made visible to the accesses `to_access` at `to_stage` after it.
void record_memory_barrier(VkCommandBuffer commands, VkPipelineStageFlags from_stage, VkAccessFlags from_access,
                           VkPipelineStageFlags to_stage, VkAccessFlags to_access);
// Whether `device` offers the device extension `name`.
bool gpu_device_has_extension(VkPhysicalDevice device, const char* name);

class VulkanInstance {
 public:
  // The loader's instance for Vulkan 1.2 compute, with the portability enumeration where the loader has it (so a
  // MoltenVK device is listed too).
  static Expected<std::unique_ptr<VulkanInstance>> create();
  // The process's instance, made on first use (again after a failure) and kept until the process exits, never
  // destroyed: the loader loads the drivers once (lavapipe loads LLVM, tens of milliseconds) instead of at every
  // listing and device, and a driver is never unloaded while memory it keeps is live (LeakSanitizer reports what a
  // driver unloaded at vkDestroyInstance still held: lavapipe's 128-byte OpenSSL init).
  static Expected<const VulkanInstance*> process();
  ~VulkanInstance();
  VulkanInstance(const VulkanInstance&) = delete;
  VulkanInstance& operator=(const VulkanInstance&) = delete;

  VkInstance handle() const { return instance_; }
  std::vector<VkPhysicalDevice> physical_devices() const;

 private:
  explicit VulkanInstance(VkInstance instance) : instance_(instance) {}
  VkInstance instance_;
};

}  // namespace kvs
