#include "kv/policies/slot_scores.h"

#include <algorithm>

#include "core/status.h"

namespace kvs {

void SlotScores::pooled(size_t num_slots, std::vector<uint64_t>& out) const {
  KVS_ASSERT(num_slots <= capacity_, "{} slots of scores with room for {}", num_slots, capacity_);
  out.assign(num_slots, 0);
  for (size_t r = 0; r < num_rows(); ++r)
    for (size_t s = 0; s < num_slots; ++s) out[s] += mass_[r * capacity_ + s];
}

void SlotScores::compact(size_t r, std::span<const uint32_t> kept) {
  uint64_t* row = &mass_[r * capacity_];
  for (size_t j = 0; j < kept.size(); ++j) {
    KVS_ASSERT(kept[j] < capacity_ && kept[j] >= j, "kept slot {} at {} of a row of {}", kept[j], j, capacity_);
    row[j] = row[kept[j]];  // kept[j] >= j: a slot is read before anything is written over it
  }
  std::fill(row + kept.size(), row + capacity_, 0);
}

}  // namespace kvs
