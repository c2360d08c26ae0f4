// Where the K/V bytes of a KvStorage come from. The storage asks for one region per layer and
// tensor when it is built and keeps each for its whole life; the accounting (block pool, tables) never
// sees them. Host RAM is the default; pinned, device, shared or file-backed memory (offload tiers,
// tensor-parallel ranks) are other allocators behind the same interface.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "core/aligned_buffer.h"

namespace kvs {

// One allocated region, zero-filled and 64-byte aligned; released by the destructor.
class KvRegion {
 public:
  virtual ~KvRegion() = default;
  virtual std::span<std::byte> bytes() = 0;
};

class KvAllocator {
 public:
  virtual ~KvAllocator() = default;
  // A region of exactly `bytes` bytes (its span's size). Throws std::bad_alloc when there is no memory.
  virtual std::unique_ptr<KvRegion> allocate(size_t bytes) = 0;
};

// Host RAM on transparent huge pages where the kernel grants them: attention reads blocks all over a
// pool of up to gigabytes. Stateless: any number of storages may share one.
class HostKvAllocator final : public KvAllocator {
 public:
  std::unique_ptr<KvRegion> allocate(size_t bytes) override;
};

}  // namespace kvs
