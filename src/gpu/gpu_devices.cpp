#include "gpu/gpu_devices.h"

#include <algorithm>
#include <cstring>

#include "gpu/vulkan_instance.h"

namespace kvs {
namespace {

std::string device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::string version_name(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

GpuDeviceInfo describe(VkPhysicalDevice device, size_t index) {
  VkPhysicalDeviceDriverProperties driver{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                              .pNext = &driver};
  VkPhysicalDeviceProperties2 properties{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &subgroup};
  vkGetPhysicalDeviceProperties2(device, &properties);
  VkPhysicalDeviceVulkan12Features v12{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features v11{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &v12};
  VkPhysicalDeviceFeatures2 features{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &v11};
  vkGetPhysicalDeviceFeatures2(device, &features);
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &families, nullptr);
  std::vector<VkQueueFamilyProperties> queues(families);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &families, queues.data());

  const VkPhysicalDeviceProperties& p = properties.properties;
  GpuDeviceInfo info{.index = index,
                     .name = p.deviceName,
                     .type = device_type_name(p.deviceType),
                     .api = version_name(p.apiVersion),
                     .driver = fmt::format("{} {}", driver.driverName, driver.driverInfo),
                     .max_storage_buffer_range = p.limits.maxStorageBufferRange,
                     .subgroup_size = subgroup.subgroupSize,
                     .max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations,
                     .shader_float16 = v12.shaderFloat16 == VK_TRUE,
                     .shader_int8 = v12.shaderInt8 == VK_TRUE,
                     .storage_16bit = v11.storageBuffer16BitAccess == VK_TRUE,
                     .storage_8bit = v12.storageBuffer8BitAccess == VK_TRUE,
                     .shader_int16 = features.features.shaderInt16 == VK_TRUE,
                     .subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT),
                     .api_version = p.apiVersion,
                     .cooperative_matrix = gpu_device_has_extension(device, "VK_KHR_cooperative_matrix")};
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, memory.memoryHeaps[h].size);
  }
  info.timestamps = std::any_of(queues.begin(), queues.end(), [](const VkQueueFamilyProperties& q) {
    return (q.queueFlags & VK_QUEUE_COMPUTE_BIT) && q.timestampValidBits > 0;
  });
  return info;
}

}  // namespace

bool vulkan_built() { return true; }

Expected<std::vector<GpuDeviceInfo>> list_gpu_devices() {
  auto instance = VulkanInstance::process();
  if (!instance) return instance.status();
  std::vector<GpuDeviceInfo> devices;
  for (VkPhysicalDevice device : (*instance)->physical_devices()) devices.push_back(describe(device, devices.size()));
  return devices;
}

}  // namespace kvs
