#include "kv/block_table.h"

#include "core/status.h"

namespace kvs {

void BlockTable::advance(std::span<const TokenId> tokens) {
  KVS_ASSERT(num_slots() + tokens.size() <= blocks_.size() * block_size_,
             "advance to {} slots with only {} blocks of {}", num_slots() + tokens.size(), blocks_.size(), block_size_);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

void BlockTable::evict(size_t count) {
  KVS_ASSERT(evicts_ && count <= num_slots(), "evict {} of {} slots from a table {}", count, num_slots(),
             evicts_ ? "under a policy" : "without an eviction policy");
  num_evicted_ += count;
  blocks_.truncate((num_slots() + block_size_ - 1) / block_size_);
}

BlockTable BlockTable::fork(BlockPool& pool) const {
  KVS_ASSERT(!evicts_, "a table under an eviction policy is forked");
  BlockTable child(block_size_, name_space_, sequence_window_);
  child.tokens_ = tokens_;
  child.blocks_ = PinnedBlocks::retain(pool, blocks());
  child.hashes_ = hashes_;
  child.contents_ = contents_;
  return child;
}

KvSlot BlockTable::slot_of(size_t position) const {
  KVS_ASSERT(position >= num_evicted_, "position {} of a table that evicted {} tokens", position, num_evicted_);
  const size_t slot = position - num_evicted_;
  KVS_ASSERT(slot / block_size_ < blocks_.size(), "slot {} beyond {} blocks of {}", slot, blocks_.size(), block_size_);
  const BlockId block = blocks()[slot / block_size_];
  KVS_ASSERT(block != kNullBlock, "position {} lies in a hole of the block table", position);
  return KvSlot{block.value * block_size_ + slot % block_size_};
}

}  // namespace kvs
