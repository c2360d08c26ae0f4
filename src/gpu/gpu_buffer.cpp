#include "gpu/gpu_buffer.h"

#include <cstring>
#include <vector>

namespace kvs {

Expected<std::unique_ptr<GpuBuffer>> GpuBuffer::create(VulkanContext& context, size_t bytes, GpuMemory memory) {
  if (bytes == 0) return Status::invalid_argument("a GPU buffer of 0 bytes");
  std::unique_ptr<GpuBuffer> buffer(new GpuBuffer(context, bytes));
  const VkBufferCreateInfo info{
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = bytes,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  const char* kind = memory == GpuMemory::kDeviceLocal    ? "device-local"
                     : memory == GpuMemory::kDeviceMapped ? "mapped device"
                     : memory == GpuMemory::kHostCached   ? "host-cached"
                                                          : "host-visible";
  const std::string what = fmt::format("a {} buffer of {} bytes on {}", kind, bytes, context.info().name);
  KVS_RETURN_IF_ERROR(vk_check(vkCreateBuffer(context.device(), &info, nullptr, &buffer->buffer_), "vkCreateBuffer")
                          .with_context(what));
  VkMemoryRequirements needs;
  vkGetBufferMemoryRequirements(context.device(), buffer->buffer_, &needs);
  constexpr VkMemoryPropertyFlags kMapped = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // The memory types to try, best first.
  std::vector<VkMemoryPropertyFlags> tries;
  if (memory == GpuMemory::kDeviceLocal) tries = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT};
  if (memory == GpuMemory::kHostVisible) tries = {kMapped};
  if (memory == GpuMemory::kDeviceMapped) tries = {kMapped | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, kMapped};
  if (memory == GpuMemory::kHostCached) tries = {kMapped | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, kMapped};
  Status allocated = Status::ok();
  for (VkMemoryPropertyFlags flags : tries) {
    auto type = context.memory_type(needs.memoryTypeBits, flags);
    if (!type) {
      allocated = type.status();
      continue;
    }
    const VkMemoryAllocateInfo allocate{
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = needs.size, .memoryTypeIndex = *type};
    allocated = vk_check(vkAllocateMemory(context.device(), &allocate, nullptr, &buffer->memory_), "vkAllocateMemory");
    if (allocated) {
      buffer->device_local_ = context.memory_is_device_local(*type);
      if (buffer->device_local_) context.note_device_allocation(static_cast<int64_t>(needs.size));
      buffer->allocated_ = needs.size;
      break;
    }
  }
  KVS_RETURN_IF_ERROR(allocated.with_context(what));
  KVS_RETURN_IF_ERROR(
      vk_check(vkBindBufferMemory(context.device(), buffer->buffer_, buffer->memory_, 0), "vkBindBufferMemory")
          .with_context(what));
  if (memory != GpuMemory::kDeviceLocal) {
    KVS_RETURN_IF_ERROR(
        vk_check(vkMapMemory(context.device(), buffer->memory_, 0, VK_WHOLE_SIZE, 0, &buffer->mapped_), "vkMapMemory")
            .with_context(what));
  }
  return buffer;
}

GpuBuffer::~GpuBuffer() {
  if (mapped_ != nullptr) vkUnmapMemory(context_.device(), memory_);
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(context_.device(), buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(context_.device(), memory_, nullptr);
  if (device_local_) context_.note_device_allocation(-static_cast<int64_t>(allocated_));
}

Status GpuBuffer::fill(uint32_t word) {
  return context_.run([&](VkCommandBuffer c) {
    vkCmdFillBuffer(c, buffer_, 0, VK_WHOLE_SIZE, word);
    record_memory_barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT);
  });
}

Status GpuBuffer::upload(std::span<const std::byte> data, size_t offset) {
  if (offset + data.size() > bytes_) {
    return Status::out_of_range(fmt::format("{} bytes at {} into a GPU buffer of {}", data.size(), offset, bytes_));
  }
  if (data.empty()) return Status::ok();
  if (mapped_ != nullptr) {
    std::memcpy(static_cast<std::byte*>(mapped_) + offset, data.data(), data.size());
    return Status::ok();
  }
  auto staging = create(context_, data.size(), GpuMemory::kHostVisible);
  if (!staging) return staging.status();
  std::memcpy((*staging)->mapped_, data.data(), data.size());
  const VkBufferCopy region{.srcOffset = 0, .dstOffset = offset, .size = data.size()};
  return context_.run([&](VkCommandBuffer c) { vkCmdCopyBuffer(c, (*staging)->buffer_, buffer_, 1, &region); });
}

Status GpuBuffer::download(std::span<std::byte> data, size_t offset) const {
  if (offset + data.size() > bytes_) {
    return Status::out_of_range(fmt::format("{} bytes at {} from a GPU buffer of {}", data.size(), offset, bytes_));
  }
  if (data.empty()) return Status::ok();
  if (mapped_ != nullptr) {
    std::memcpy(data.data(), static_cast<const std::byte*>(mapped_) + offset, data.size());
    return Status::ok();
  }
  auto staging = create(context_, data.size(), GpuMemory::kHostVisible);
  if (!staging) return staging.status();
  const VkBufferCopy region{.srcOffset = offset, .dstOffset = 0, .size = data.size()};
  KVS_RETURN_IF_ERROR(
      context_.run([&](VkCommandBuffer c) { vkCmdCopyBuffer(c, buffer_, (*staging)->buffer_, 1, &region); }));
  std::memcpy(data.data(), (*staging)->mapped_, data.size());
  return Status::ok();
}

}  // namespace kvs
