// `--profile` on the GPU: the time each kind of shader took over the steps of a run, from the device's timestamps
// (gpu_recorder.h writes one after every dispatch). Vulkan-free, thread-safe: every runner of a model adds to one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kvs {

struct GpuKernelTime {
  std::string kind;  // the shader: "matvec", "paged_attention", ...
  double seconds = 0.0;
  uint64_t dispatches = 0;
};

class GpuProfile {
 public:
  void add(const std::string& kind, double seconds) {
    const std::lock_guard lock(mutex_);
    GpuKernelTime& t = kinds_[kind];
    t.seconds += seconds;
    ++t.dispatches;
  }
  void add_step() {
    const std::lock_guard lock(mutex_);
    ++steps_;
  }
  // Every kind, the longest first.
  std::vector<GpuKernelTime> kinds() const {
    const std::lock_guard lock(mutex_);
    std::vector<GpuKernelTime> out;
    for (const auto& [kind, t] : kinds_) out.push_back({kind, t.seconds, t.dispatches});
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
    return out;
  }
  uint64_t steps() const {
    const std::lock_guard lock(mutex_);
    return steps_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, GpuKernelTime> kinds_;
  uint64_t steps_ = 0;
};

}  // namespace kvs
