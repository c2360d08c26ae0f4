// Host memory for KV blocks of one size, addressed by slot: slabs of up to 64 MiB (2 MiB pages asked for),
// allocated the first time one of their slots is used and kept, so a tier that refills its slots stores without
// allocating or faulting pages in (a fresh 4 KiB-page buffer per block cost a page fault per 4 KiB). Which block a
// slot holds is its owner's business: the host tier's directory on the rank that decides, and on every other
// tensor-parallel rank the same slots by the KV op log (kv/kv_ops.h), so a slot names the same block everywhere.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"

namespace kvs {

class HostSlabs {
 public:
  explicit HostSlabs(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Sets the size of every slot's block (once, before the first slot is used); 0 until then.
  void set_block_bytes(size_t block_bytes);
  size_t block_bytes() const { return block_bytes_; }
  // Slots within the capacity: [0, num_slots()).
  size_t num_slots() const { return block_bytes_ == 0 ? 0 : capacity_ / block_bytes_; }
  // The bytes of `slot` (< num_slots()); its slab is allocated on first use.
  std::span<std::byte> slot(size_t slot);

 private:
  static constexpr size_t kSlabBytes = size_t{64} << 20;
  size_t capacity_;
  size_t block_bytes_ = 0;
  size_t slots_per_slab_ = 0;
  std::vector<AlignedBuffer<std::byte>> slabs_;  // slab k holds slots [k * slots_per_slab_, (k + 1) * ...)
};

}  // namespace kvs
