#include "kv/policies/slot_scores.h"

#include <algorithm>

#include "core/status.h"

namespace kvs {

void SlotScores::stamp(size_t num_slots, size_t num_evicted) {
  KVS_ASSERT(num_slots <= capacity_, "{} slots of scores with room for {}", num_slots, capacity_);
  for (size_t r = 0; r < num_rows(); ++r)
    for (size_t s = stamped_; s < num_slots; ++s) births_[r * capacity_ + s] = s + num_evicted;
  stamped_ = std::max(stamped_, num_slots);
}

void SlotScores::scores(size_t r, bool all_rows, size_t num_slots, size_t num_tokens, bool per_query,
                        std::vector<double>& out) const {
  KVS_ASSERT(num_slots <= stamped_, "scores of {} slots, {} stamped", num_slots, stamped_);
  const size_t first = all_rows ? 0 : r, last = all_rows ? num_rows() : r + 1;
  out.assign(num_slots, 0.0);
  for (size_t row = first; row < last; ++row) {
    for (size_t s = 0; s < num_slots; ++s) {
      const size_t at = row * capacity_ + s;
      const double mass = static_cast<double>(mass_[at]);
      out[s] += per_query ? mass / static_cast<double>(num_tokens - births_[at]) : mass;
    }
  }
}

void SlotScores::compact(std::span<const std::vector<uint32_t>> kept) {
  for (size_t r = 0; r < num_rows(); ++r) {
    const std::vector<uint32_t>& keep = kept[kept.size() == 1 ? 0 : r];
    uint64_t* mass = &mass_[r * capacity_];
    uint64_t* born = &births_[r * capacity_];
    for (size_t j = 0; j < keep.size(); ++j) {
      KVS_ASSERT(keep[j] < stamped_ && keep[j] >= j, "kept slot {} at {} of {} stamped", keep[j], j, stamped_);
      mass[j] = mass[keep[j]];  // keep[j] >= j: a slot is read before anything is written over it
      born[j] = born[keep[j]];
    }
    std::fill(mass + keep.size(), mass + capacity_, 0);
  }
  stamped_ = kept[0].size();
}

void SlotScores::clear() {
  std::fill(mass_.begin(), mass_.end(), 0);
  stamped_ = 0;
}

}  // namespace kvs
