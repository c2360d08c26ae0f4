#include "gpu/vulkan_kv_allocator.h"

#include <cstring>
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
  auto buffer = GpuBuffer::create(context_, bytes, GpuMemory::kHostVisible);
  if (!buffer) throw std::bad_alloc();
  std::span<std::byte> mapped = (*buffer)->mapped();
  std::memset(mapped.data(), 0, mapped.size());  // KvRegion's contract: zero-filled
  KVS_ASSERT(reinterpret_cast<uintptr_t>(mapped.data()) % 64 == 0, "a mapping at {}: not 64-byte aligned",
             static_cast<const void*>(mapped.data()));
  {
    const std::lock_guard lock(mutex_);
    buffers_[mapped.data()] = buffer->get();
  }
  return std::make_unique<VulkanKvRegion>(*this, std::move(*buffer));
}

GpuBuffer* VulkanKvAllocator::buffer_at(const void* base) const {
  const std::lock_guard lock(mutex_);
  const auto it = buffers_.find(base);
  return it == buffers_.end() ? nullptr : it->second;
}

void VulkanKvAllocator::forget(const void* base) {
  const std::lock_guard lock(mutex_);
  buffers_.erase(base);
}

}  // namespace kvs
