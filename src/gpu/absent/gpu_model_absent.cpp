// gpu_model.h for a build without Vulkan.
#include "gpu/gpu_model.h"

namespace kvs {

Expected<std::unique_ptr<Model>> make_gpu_model(const DecoderModel&, size_t) {
  return Status::unimplemented(
      "this kvserve was built without Vulkan: --device vulkan needs libvulkan-dev, glslc and mesa-vulkan-drivers "
      "(scripts/install-deps.sh) and a rebuild");
}

}  // namespace kvs
