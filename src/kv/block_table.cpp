#include "kv/block_table.h"

#include "core/status.h"

namespace kvs {

void BlockTable::advance(std::span<const TokenId> tokens) {
  KVS_ASSERT(num_tokens() + tokens.size() <= blocks_.size() * block_size_,
             "advance to {} tokens with only {} blocks of {}", num_tokens() + tokens.size(), blocks_.size(),
             block_size_);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

BlockTable BlockTable::fork(BlockPool& pool) const {
  BlockTable child(block_size_, name_space_, window_);
  child.tokens_ = tokens_;
  child.blocks_ = PinnedBlocks::retain(pool, blocks());
  child.hashes_ = hashes_;
  child.contents_ = contents_;
  return child;
}

KvSlot BlockTable::slot_of(size_t position) const {
  KVS_ASSERT(position / block_size_ < blocks_.size(), "position {} beyond {} blocks of {}", position, blocks_.size(),
             block_size_);
  const BlockId block = blocks()[position / block_size_];
  KVS_ASSERT(block != kNullBlock, "position {} lies in a hole of the block table", position);
  return KvSlot{block.value * block_size_ + position % block_size_};
}

}  // namespace kvs
