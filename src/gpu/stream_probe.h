// The streaming-read probe (shaders/stream_sum.comp) on a device buffer: the sum of its words modulo 2^32, which
// proves every word was read; `kvserve bench --device vulkan` times it for the bandwidth B* its ratios are taken to.
#pragma once

#include <memory>

#include "gpu/compute_pipeline.h"
#include "gpu/gpu_recorder.h"

namespace kvs {

class StreamProbe {
 public:
  static constexpr uint32_t kWorkgroup = 256;
  static constexpr uint32_t kMaxWorkgroups = 1024;

  static Expected<std::unique_ptr<StreamProbe>> create(VulkanContext& context);
  // The sum modulo 2^32 of the first `words` 32-bit words of `data` (words % 4 == 0).
  Expected<uint32_t> sum(GpuBuffer& data, size_t words);
  // One pass of the same read, timed: by the device's timestamps where its queue has them, else the host's clock
  // around the submission. The sum comes back too, so a caller can check every word was read.
  struct Timed {
    uint32_t sum = 0;
    double seconds = 0.0;
  };
  Expected<Timed> timed_sum(GpuBuffer& data, size_t words);

 private:
  StreamProbe(VulkanContext& context) : context_(context) {}
  VulkanContext& context_;
  std::unique_ptr<ComputePipeline> pipeline_;
  std::unique_ptr<GpuBuffer> sums_;        // host-visible, one word per workgroup
  std::unique_ptr<GpuRecorder> recorder_;  // a pass is one step of its own
  GpuProfile profile_;                     // the passes' device times (with timestamps)
};

}  // namespace kvs
