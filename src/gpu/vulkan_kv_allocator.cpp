#include "gpu/vulkan_kv_allocator.h"

#include <new>
#include <stdexcept>

namespace kvs {

class VulkanKvRegion final : public KvRegion {
 public:
  VulkanKvRegion(VulkanKvAllocator& owner, std::unique_ptr<GpuBuffer> buffer)
      : owner_(owner), buffer_(std::move(buffer)) {}
  ~VulkanKvRegion() override { owner_.forget(buffer_->mapped().data()); }
  std::span<std::byte> bytes() override { return buffer_->mapped(); }

 private:
  VulkanKvAllocator& owner_;
  std::unique_ptr<GpuBuffer> buffer_;
};

std::unique_ptr<KvRegion> VulkanKvAllocator::allocate(size_t bytes) {
  if (bytes > context_.info().max_storage_buffer_range) {
    throw std::length_error(
        fmt::format("a KV pool of {} bytes for one layer exceeds one storage binding of {} ({} "
                    "bytes); fewer blocks (--kv-memory) fit",
                    bytes, context_.info().name, context_.info().max_storage_buffer_range));
  }
  auto buffer = GpuBuffer::create(context_, bytes, memory_);
  if (!buffer) throw std::bad_alloc();
  // KvRegion's contract: zero-filled (by the device: no host writes across the bus).
  if (!(*buffer)->zero()) throw std::bad_alloc();
  std::span<std::byte> mapped = (*buffer)->mapped();
  KVS_ASSERT(reinterpret_cast<uintptr_t>(mapped.data()) % 64 == 0, "a mapping at {}: not 64-byte aligned",
             static_cast<const void*>(mapped.data()));
  {
    const std::lock_guard lock(mutex_);
    buffers_[mapped.data()] = buffer->get();
    bytes_ += bytes;
    if (!(*buffer)->device_local()) host_bytes_ += bytes;
  }
  return std::make_unique<VulkanKvRegion>(*this, std::move(*buffer));
}

GpuBuffer* VulkanKvAllocator::buffer_at(const void* base) const {
  const std::lock_guard lock(mutex_);
  const auto it = buffers_.find(base);
  return it == buffers_.end() ? nullptr : it->second;
}

VulkanKvAllocator::Usage VulkanKvAllocator::usage() const {
  const std::lock_guard lock(mutex_);
  return {.bytes = bytes_, .host_bytes = host_bytes_};
}

void VulkanKvAllocator::forget(const void* base) {
  const std::lock_guard lock(mutex_);
  const auto it = buffers_.find(base);
  if (it == buffers_.end()) return;
  bytes_ -= it->second->bytes();
  if (!it->second->device_local()) host_bytes_ -= it->second->bytes();
  buffers_.erase(it);
}

}  // namespace kvs
