// A Vulkan buffer and its memory (RAII), usable as a storage binding and as a transfer source and destination.
// kDeviceLocal: the GPU's own memory, filled and read through a host-visible staging buffer (copy_to / copy_from);
// kHostVisible: mapped for the host's whole lifetime of the buffer (staging, small per-step metadata);
// kDeviceMapped: the GPU's own memory mapped by the host where the device offers it (lavapipe, integrated GPUs,
// resizable BAR), else host memory as kHostVisible (device_local() tells which); kHostCached: host memory the device
// copies to and from, cached for the host's reads where the device offers such a type (the KV host tier's slabs).
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "gpu/vulkan_context.h"

namespace kvs {

enum class GpuMemory { kDeviceLocal, kHostVisible, kDeviceMapped, kHostCached };

class GpuBuffer {
 public:
  // An error names the bytes and the device when the memory is not there (out of device memory is not a crash).
  static Expected<std::unique_ptr<GpuBuffer>> create(VulkanContext& context, size_t bytes, GpuMemory memory);
  ~GpuBuffer();
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  size_t bytes() const { return bytes_; }
  // Whether the bytes are in the device's own memory (a device-local memory type).
  bool device_local() const { return device_local_; }
  // The mapped bytes of a kHostVisible buffer (coherent); empty for kDeviceLocal.
  std::span<std::byte> mapped() const { return {static_cast<std::byte*>(mapped_), mapped_ ? bytes_ : 0}; }

  // Sets every 32-bit word to `word` on the device (vkCmdFillBuffer: no host writes across the bus); zero() to 0.
  Status fill(uint32_t word);
  Status zero() { return fill(0); }
  // Host bytes into the buffer at `offset` (through a staging buffer when device-local), and back.
  Status upload(std::span<const std::byte> data, size_t offset = 0);
  Status download(std::span<std::byte> data, size_t offset = 0) const;

 private:
  GpuBuffer(VulkanContext& context, size_t bytes) : context_(context), bytes_(bytes) {}
  VulkanContext& context_;
  size_t bytes_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  bool device_local_ = false;
  size_t allocated_ = 0;  // the memory's size (the requirements' rounding of bytes_)
};

}  // namespace kvs
