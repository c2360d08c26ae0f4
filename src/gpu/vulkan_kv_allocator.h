// KV pools in memory that the GPU's shaders bind and the host maps (GpuMemory::kDeviceMapped: the device's own memory
// on lavapipe, integrated GPUs and discrete ones with resizable BAR; host memory the GPU reads across the bus where
// the device maps none of its own, which usage() reports and the start-up line says): KvStorage and the host's KV
// executor (prefix-hit copies, copy-on-write, tier transfers) work on the bytes in place, and the GPU forward binds the
// same buffers. One region per layer and tensor, as KvStorage asks; each must fit one storage binding of the device.
#pragma once

#include <map>
#include <mutex>

#include "gpu/gpu_buffer.h"
#include "kv/kv_allocator.h"

namespace kvs {

class VulkanKvAllocator final : public KvAllocator {
 public:
  // `memory`: kDeviceMapped for pools; kHostCached for the host tier's slabs (kv/tiers/host_slabs.h), which the
  // device's transfers fill and read.
  explicit VulkanKvAllocator(VulkanContext& context, GpuMemory memory = GpuMemory::kDeviceMapped)
      : context_(context), memory_(memory) {}
  // Throws std::bad_alloc when the device has no such memory (KvAllocator's contract), std::length_error when the
  // region is larger than one binding may span.
  std::unique_ptr<KvRegion> allocate(size_t bytes) override;
  // The buffer of the region whose bytes begin at `base`, or null.
  GpuBuffer* buffer_at(const void* base) const;
  // The bytes of the live regions, and those of them in host memory (not the device's own).
  struct Usage {
    size_t bytes = 0, host_bytes = 0;
  };
  Usage usage() const;

 private:
  friend class VulkanKvRegion;
  void forget(const void* base);
  VulkanContext& context_;
  GpuMemory memory_;
  mutable std::mutex mutex_;
  std::map<const void*, GpuBuffer*> buffers_;
  size_t bytes_ = 0, host_bytes_ = 0;
};

}  // namespace kvs
