#include "gpu/vulkan_instance.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

namespace kvs {

const char* vk_result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult (unnamed)";
  }
}

Status vk_check(VkResult result, const char* what) {
  if (result == VK_SUCCESS) return Status::ok();
  std::string message = fmt::format("{} failed: {} ({})", what, vk_result_name(result), static_cast<int>(result));
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    return Status::out_of_memory(std::move(message));
  }
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return Status::unavailable(message +
                               ": no Vulkan driver (ICD) is installed for this machine's devices "
                               "(Mesa's lavapipe: Debian mesa-vulkan-drivers)");
  }
  return Status::unavailable(std::move(message));
}

Expected<std::unique_ptr<VulkanInstance>> VulkanInstance::create() {
  uint32_t count = 0;
  std::vector<const char*> extensions;
  if (vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr) == VK_SUCCESS) {
    std::vector<VkExtensionProperties> available(count);
    vkEnumerateInstanceExtensionProperties(nullptr, &count, available.data());
    for (const VkExtensionProperties& e : available) {
      if (std::strcmp(e.extensionName, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME) == 0) {
        extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
      }
    }
  }
  const VkApplicationInfo app{.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                              .pApplicationName = "kvserve",
                              .applicationVersion = 1,
                              .pEngineName = "kvserve",
                              .engineVersion = 1,
                              .apiVersion = VK_API_VERSION_1_2};
  const VkInstanceCreateInfo info{
      .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
      .flags = extensions.empty() ? 0u : VkInstanceCreateFlags{VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR},
      .pApplicationInfo = &app,
      .enabledExtensionCount = static_cast<uint32_t>(extensions.size()),
      .ppEnabledExtensionNames = extensions.data()};
  VkInstance instance = VK_NULL_HANDLE;
  KVS_RETURN_IF_ERROR(vk_check(vkCreateInstance(&info, nullptr, &instance), "vkCreateInstance"));
  return std::unique_ptr<VulkanInstance>(new VulkanInstance(instance));
}

Expected<const VulkanInstance*> VulkanInstance::process() {
  static std::mutex mutex;
  static const VulkanInstance* instance = nullptr;  // reachable until exit, on purpose (see the header)
  const std::lock_guard lock(mutex);
  if (instance == nullptr) {
    auto made = create();
    if (!made) return made.status();
    instance = made->release();
  }
  return instance;
}

VulkanInstance::~VulkanInstance() { vkDestroyInstance(instance_, nullptr); }

std::vector<VkPhysicalDevice> VulkanInstance::physical_devices() const {
  uint32_t count = 0;
  if (vkEnumeratePhysicalDevices(instance_, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> devices(count);
  if (vkEnumeratePhysicalDevices(instance_, &count, devices.data()) != VK_SUCCESS) return {};
  devices.resize(count);
  return devices;
}

void record_memory_barrier(VkCommandBuffer commands, VkPipelineStageFlags from_stage, VkAccessFlags from_access,
                           VkPipelineStageFlags to_stage, VkAccessFlags to_access) {
  const VkMemoryBarrier b{
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = from_access, .dstAccessMask = to_access};
  vkCmdPipelineBarrier(commands, from_stage, to_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
}

bool gpu_device_has_extension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

}  // namespace kvs
