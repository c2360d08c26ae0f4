// The streaming-read probe (shaders/stream_sum.comp) on a device buffer: the sum of its words modulo 2^32, which
// proves every word was read; `kvserve bench --device vulkan` times it for the bandwidth B* its ratios are taken to.
#pragma once

#include <memory>

#include "gpu/compute_pipeline.h"

namespace kvs {

class StreamProbe {
 public:
  static constexpr uint32_t kWorkgroup = 256;
  static constexpr uint32_t kMaxWorkgroups = 1024;

  static Expected<std::unique_ptr<StreamProbe>> create(VulkanContext& context);
  // The sum modulo 2^32 of the first `words` 32-bit words of `data` (words % 4 == 0).
  Expected<uint32_t> sum(GpuBuffer& data, size_t words);

 private:
  StreamProbe(VulkanContext& context) : context_(context) {}
  VulkanContext& context_;
  std::unique_ptr<ComputePipeline> pipeline_;
  std::unique_ptr<GpuBuffer> sums_;  // host-visible, one word per workgroup
};

}  // namespace kvs
