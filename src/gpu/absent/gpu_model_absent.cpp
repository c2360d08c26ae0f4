// gpu_model.h for a build without Vulkan.
#include "gpu/gpu_model.h"

namespace kvs {

namespace {

Status without_vulkan() {
  return Status::unimplemented(
      "this kvserve was built without Vulkan: --device vulkan needs libvulkan-dev, glslc and mesa-vulkan-drivers "
      "(scripts/install-deps.sh) and a rebuild");
}

}  // namespace

Expected<std::unique_ptr<Model>> make_gpu_model(const DecoderModel&, size_t, GpuModelOptions) {
  return without_vulkan();
}

Expected<GpuMemoryReport> gpu_memory_report(const Model&, const KvCacheSpec&, size_t) { return without_vulkan(); }

std::string gpu_memory_line(const Model&, const GpuMemoryReport&, size_t, size_t) { return {}; }

Expected<GpuBandwidth> gpu_stream_bandwidth(const Model&, uint64_t, size_t) { return without_vulkan(); }

std::vector<GpuKernelTime> gpu_profile(const Model&, uint64_t* steps) {
  if (steps != nullptr) *steps = 0;
  return {};
}

}  // namespace kvs
