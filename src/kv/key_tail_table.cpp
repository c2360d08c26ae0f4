#include "kv/key_tail_table.h"

#include <fmt/format.h>

namespace kvs {

KeyTailTable::KeyTailTable(size_t num_tails, size_t num_blocks)
    : num_tails_(num_tails), tail_of_(num_blocks, kNoKeyTail) {
  KVS_ASSERT(num_tails < kNoKeyTail, "{} key tails", num_tails);
  for (size_t t = num_tails; t > 0; --t) free_.push_back(static_cast<uint32_t>(t - 1));  // tail 0 first
}

bool KeyTailTable::assign(BlockId block) {
  KVS_ASSERT(block.value < tail_of_.size(), "block {} of {}", block.value, tail_of_.size());
  if (tail_of_[block.value] != kNoKeyTail) return true;
  if (free_.empty()) return false;
  tail_of_[block.value] = free_.back();
  free_.pop_back();
  return true;
}

void KeyTailTable::release(BlockId block) {
  KVS_ASSERT(block.value < tail_of_.size(), "block {} of {}", block.value, tail_of_.size());
  uint32_t& tail = tail_of_[block.value];
  if (tail == kNoKeyTail) return;
  free_.push_back(tail);
  tail = kNoKeyTail;
}

Status KeyTailTable::check_invariants() const {
  std::vector<int> owners(num_tails_, 0);
  for (uint32_t t : free_) {
    if (t >= num_tails_) return Status::corrupt(fmt::format("free key tail {} of {}", t, num_tails_));
    ++owners[t];
  }
  for (size_t b = 0; b < tail_of_.size(); ++b) {
    const uint32_t t = tail_of_[b];
    if (t == kNoKeyTail) continue;
    if (t >= num_tails_) return Status::corrupt(fmt::format("block {} holds key tail {} of {}", b, t, num_tails_));
    ++owners[t];
  }
  for (size_t t = 0; t < num_tails_; ++t) {
    if (owners[t] != 1)
      return Status::corrupt(fmt::format("key tail {} is free or held {} times (must be once)", t, owners[t]));
  }
  return Status::ok();
}

}  // namespace kvs
