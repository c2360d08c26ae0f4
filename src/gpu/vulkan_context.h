// One Vulkan device opened for compute (RAII): over the process's instance, the chosen physical device, a logical
// device with a compute queue (and a second queue of its family for transfers where the device has one), and a command
// pool; run() records a command buffer, submits it and waits for it.
//
// Transfers beside the compute work (the KV tiers' moves, gpu/vulkan_kv_executor.h): submit_transfer() submits on the
// transfer queue (the compute queue itself where the device has one queue, as lavapipe) without waiting, and each
// signals the next value of a timeline semaphore. A compute submission (run(), submit_and_wait()) waits on the device,
// never on the host, for the value require_transfers() set last: the moves it depends on are done before its commands
// run (a pool slot demoted is written only after its copy; a block loaded is read only after it arrived), while the
// moves not required yet (blocks loaded ahead, for requests still waiting) run beside it. wait_transfers() waits on
// the host, before the host reads or writes the bytes a transfer moves.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "gpu/gpu_devices.h"
#include "gpu/vulkan_instance.h"

namespace kvs {

class VulkanContext {
 public:
  // Device `index` of list_gpu_devices(); an error naming the index and the devices there are when it is out of range.
  static Expected<std::unique_ptr<VulkanContext>> create(size_t index);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  const GpuDeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  // A memory type index with all of `required` among the types `allowed` (a bit per type), or an error.
  Expected<uint32_t> memory_type(uint32_t allowed, VkMemoryPropertyFlags required) const;
  bool memory_is_device_local(uint32_t type) const;
  // Bytes of the largest device-local heap this process may still allocate: the driver's budget less what the
  // process uses (VK_EXT_memory_budget) where the device has it, else the heap's size less what kvserve allocated.
  uint64_t device_memory_available() const;
  // Device-local bytes this context's buffers hold now (GpuBuffer keeps it).
  uint64_t device_bytes_allocated() const { return device_allocated_; }
  void note_device_allocation(int64_t bytes) { device_allocated_ += static_cast<uint64_t>(bytes); }

  // Records `record` into a fresh command buffer, submits it and waits for the queue (a lost device is an error).
  // One submission at a time: callers on several threads (engines sharing the device) take turns.
  // `submitted` (optional): set to whether the queue took the commands (when false, nothing of them ran).
  Status run(const std::function<void(VkCommandBuffer)>& record, bool* submitted = nullptr);
  // Submits `commands` (recorded elsewhere, ended) and waits for them; the same turn-taking as run().
  Status submit_and_wait(VkCommandBuffer commands, bool* submitted = nullptr);

  // Transfers (see above): the value the transfer timeline reaches when `record`'s commands are done.
  Expected<uint64_t> submit_transfer(const std::function<void(VkCommandBuffer)>& record);
  // Compute submissions from now on wait (on the device) for the timeline to reach `value` (the largest asked for).
  void require_transfers(uint64_t value);
  // The host waits until the timeline reaches `value` (a lost device is an error); finished transfers' command
  // buffers are freed.
  Status wait_transfers(uint64_t value);
  uint64_t transfers_submitted() const { return transfer_value_; }
  VkSemaphore transfer_timeline() const { return transfer_timeline_; }
  // Whether transfers have a queue of their own (else they share the compute queue, in submission order).
  bool separate_transfer_queue() const { return transfer_queue_ != queue_; }

  uint32_t queue_family() const { return family_; }
  // Nanoseconds per timestamp tick, and the valid bits of the compute queue's timestamps (0: none).
  double timestamp_period() const { return timestamp_period_; }
  uint32_t timestamp_bits() const { return timestamp_bits_; }

 private:
  VulkanContext() = default;
  // A fresh command buffer with `record`'s commands, ended (pool_mutex_ held); freed again on an error.
  Expected<VkCommandBuffer> record_commands(const std::function<void(VkCommandBuffer)>& record);
  // Frees the command buffers of the transfers the timeline has passed `done` for (pool_mutex_ held).
  void free_transfers_done(uint64_t done);
  const VulkanInstance* instance_ = nullptr;  // the process's (VulkanInstance::process())
  GpuDeviceInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkQueue transfer_queue_ = VK_NULL_HANDLE;  // queue_, or a second queue of its family
  VkSemaphore transfer_timeline_ = VK_NULL_HANDLE;
  uint64_t transfer_value_ = 0;      // the last value a transfer signals (guarded by submit_mutex_)
  uint64_t required_transfers_ = 0;  // what compute submissions wait for (guarded by submit_mutex_)
  std::vector<std::pair<uint64_t, VkCommandBuffer>> transfers_in_flight_;  // value, commands (guarded by pool_mutex_)
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  uint32_t family_ = 0, timestamp_bits_ = 0;
  double timestamp_period_ = 1.0;
  bool memory_budget_ = false;  // VK_EXT_memory_budget
  std::atomic<uint64_t> device_allocated_{0};
  std::mutex pool_mutex_;    // guards the command pool of run()
  std::mutex submit_mutex_;  // guards the queue and the fence
};

}  // namespace kvs
