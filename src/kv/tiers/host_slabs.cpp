#include "kv/tiers/host_slabs.h"

#include <algorithm>

#include "core/status.h"

namespace kvs {

void HostSlabs::set_block_bytes(size_t block_bytes) {
  KVS_ASSERT(block_bytes_ == 0 || block_bytes_ == block_bytes, "host slabs of {}-byte blocks asked for {} bytes",
             block_bytes_, block_bytes);
  block_bytes_ = block_bytes;
  slots_per_slab_ = std::max<size_t>(1, std::min(kSlabBytes, capacity_) / block_bytes_);
}

HostSlabs::Address HostSlabs::address(size_t slot) {
  KVS_ASSERT(slot < num_slots(), "host slot {} of {}", slot, num_slots());
  const size_t slab = slot / slots_per_slab_;
  while (slabs_.size() <= slab) {  // the last slab needs only what is left of the capacity
    const size_t first = slabs_.size() * slots_per_slab_;
    const size_t bytes = std::min(slots_per_slab_, num_slots() - first) * block_bytes_;
    // Throws std::bad_alloc when there is no memory.
    slabs_.push_back(allocator_ != nullptr ? allocator_->allocate(bytes) : ram_.allocate(bytes));
  }
  return {.slab = slabs_[slab]->bytes().data(), .offset = (slot % slots_per_slab_) * block_bytes_};
}

std::span<std::byte> HostSlabs::slot(size_t slot) {
  const Address at = address(slot);
  return slabs_[slot / slots_per_slab_]->bytes().subspan(at.offset, block_bytes_);
}

}  // namespace kvs
