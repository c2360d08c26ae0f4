// What kvserve can see of this machine's GPUs through Vulkan, without a device opened: the listing of
// `kvserve devices` and the facts device selection goes by. Usable where Vulkan is absent (the build option
// KVS_VULKAN off, or no driver installed): list_gpu_devices() then says why there are none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvs {

struct GpuDeviceInfo {
  size_t index = 0;                       // the N of --device vulkan:N: the loader's order
  std::string name;                       // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;                       // discrete, integrated, virtual, cpu (lavapipe) or other
  std::string api;                        // the Vulkan version the driver implements, "1.3.230"
  std::string driver;                     // the driver's name and version string
  uint64_t device_local_bytes = 0;        // the largest device-local heap
  uint64_t max_storage_buffer_range = 0;  // bytes one storage binding may span (lavapipe: 128 MiB)
  uint32_t subgroup_size = 0;             // lanes a subgroup reduction spans (lavapipe: 8 with AVX2, NVIDIA: 32)
  uint32_t max_workgroup_invocations = 0;
  bool shader_float16 = false;       // fp16 arithmetic in shaders
  bool shader_int8 = false;          // int8 arithmetic in shaders
  bool storage_16bit = false;        // 16-bit loads and stores from storage buffers (f16/bf16 weights and K/V)
  bool storage_8bit = false;         // 8-bit loads and stores (quantized blocks)
  bool shader_int16 = false;         // int16 arithmetic in shaders
  bool subgroup_arithmetic = false;  // subgroupAdd and the like in compute shaders (the reductions)
  uint32_t api_version = 0;          // VK_MAKE_API_VERSION of `api`
  bool cooperative_matrix = false;   // VK_KHR_cooperative_matrix (matrix units)
  bool timestamps = false;           // compute queues write timestamps (--profile)
};

// True when this binary was built with Vulkan (KVS_VULKAN).
bool vulkan_built();

// Every Vulkan device, in the loader's order; an error naming the reason when Vulkan is not built in, no loader or
// driver is installed, or the instance cannot be created.
Expected<std::vector<GpuDeviceInfo>> list_gpu_devices();

}  // namespace kvs
