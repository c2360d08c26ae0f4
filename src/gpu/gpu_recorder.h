// One step's work on the device as one submission: dispatches recorded into one command buffer, each behind a barrier
// that makes every earlier dispatch's and copy's writes visible to it, submitted once and waited for (a step is a
// chain of dependent operations: the shaders of one layer feed the next). Descriptor sets come from pools reset at
// every begin(). With profiling on, a timestamp after each dispatch gives each its time, summed per kind (the
// shader's name) for `--profile`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/compute_pipeline.h"
#include "gpu/gpu_buffer.h"
#include "gpu/gpu_profile.h"

namespace kvs {

class GpuRecorder {
 public:
  static Expected<std::unique_ptr<GpuRecorder>> create(VulkanContext& context);
  ~GpuRecorder();
  GpuRecorder(const GpuRecorder&) = delete;
  GpuRecorder& operator=(const GpuRecorder&) = delete;

  // Starts recording a step (none may be open).
  Status begin();
  bool recording() const { return open_; }
  // Appends a dispatch of `pipeline` over `buffers` (binding i = buffers[i]) with `push`; `kind` names it in the
  // profile (a string literal: it must outlive the step).
  Status dispatch(const ComputePipeline& pipeline, std::span<GpuBuffer* const> buffers, const void* push,
                  uint32_t groups_x, uint32_t groups_y, const char* kind);
  // Appends copies of `regions` from `from` to `to` (vkCmdCopyBuffer, any byte offsets), behind the same barrier as a
  // dispatch: they see every earlier write, and later dispatches and copies see theirs.
  Status copy(GpuBuffer& from, GpuBuffer& to, std::span<const VkBufferCopy> regions);
  // Ends the step, submits it and waits for it; the device's writes are then visible to the host (mapped buffers).
  // On an error (a lost device) the step's effects are undefined and the error names the call.
  Status submit();
  // Drops the open step unsubmitted (after an error while recording it), so the next begin() starts afresh.
  void abandon();

  // From the next begin() on, a timestamp after every dispatch and each dispatch's time added to `sink` by kind (null:
  // none). Needs the queue's timestamps (an error names the device).
  Status set_profile(GpuProfile* sink);

 private:
  explicit GpuRecorder(VulkanContext& context) : context_(context) {}
  Expected<VkDescriptorSet> allocate_set(const ComputePipeline& pipeline);
  Status ensure_queries(uint32_t count);

  VulkanContext& context_;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> set_pools_;  // each of kSetsPerPool sets; all reset at begin(), kept for the next step
  size_t current_pool_ = 0, sets_in_pool_ = 0;
  bool open_ = false, profiling_ = false, any_work_ = false;  // any_work_: a dispatch or copy recorded
  GpuProfile* profile_ = nullptr;

  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t query_capacity_ = 0;
  std::vector<const char*> kinds_;  // this step's dispatches in order (profiling)
};

}  // namespace kvs
