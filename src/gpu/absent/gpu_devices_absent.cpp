// gpu_devices.h for a build without Vulkan (KVS_VULKAN off, or its loader or glslc not installed at build time).
#include "gpu/gpu_devices.h"

namespace kvs {

bool vulkan_built() { return false; }

Expected<std::vector<GpuDeviceInfo>> list_gpu_devices() {
  return Status::unimplemented(
      "this kvserve was built without Vulkan: install libvulkan-dev, glslc and mesa-vulkan-drivers "
      "(scripts/install-deps.sh) and rebuild");
}

}  // namespace kvs
