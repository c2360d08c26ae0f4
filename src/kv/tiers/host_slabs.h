// Host memory for KV blocks of one size, addressed by slot: slabs of up to 64 MiB (2 MiB pages asked for),
// allocated the first time one of their slots is used and kept, so a tier that refills its slots stores without
// allocating or faulting pages in (a fresh 4 KiB-page buffer per block cost a page fault per 4 KiB). Which block a
// slot holds is its owner's business: the host tier's directory on the rank that decides, and on every other
// tensor-parallel rank the same slots by the KV op log (kv/kv_ops.h), so a slot names the same block everywhere.
// The slabs come from a KvAllocator when one is given: a device backend's host memory that it copies blocks to and
// from itself (gpu/vulkan_kv_executor.h), so a block crosses the bus by the device's DMA, not the host's loads.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kv/kv_allocator.h"

namespace kvs {

class HostSlabs {
 public:
  // `allocator` (null: host RAM, huge pages asked for) outlives the slabs.
  explicit HostSlabs(size_t capacity_bytes, KvAllocator* allocator = nullptr)
      : capacity_(capacity_bytes), allocator_(allocator) {}

  // Sets the size of every slot's block (once, before the first slot is used); 0 until then.
  void set_block_bytes(size_t block_bytes);
  size_t block_bytes() const { return block_bytes_; }
  // Slots within the capacity: [0, num_slots()).
  size_t num_slots() const { return block_bytes_ == 0 ? 0 : capacity_ / block_bytes_; }
  // The bytes of `slot` (< num_slots()); its slab is allocated on first use.
  std::span<std::byte> slot(size_t slot);
  // Where `slot` lies: its slab's first byte (what the allocator handed out) and the slot's offset in it.
  struct Address {
    const std::byte* slab = nullptr;
    size_t offset = 0;
  };
  Address address(size_t slot);

 private:
  static constexpr size_t kSlabBytes = size_t{64} << 20;
  size_t capacity_;
  size_t block_bytes_ = 0;
  size_t slots_per_slab_ = 0;
  KvAllocator* allocator_;  // null: ram_
  HostKvAllocator ram_;
  std::vector<std::unique_ptr<KvRegion>> slabs_;  // slab k holds slots [k * slots_per_slab_, (k + 1) * ...)
};

}  // namespace kvs
