#include "kv/block_table.h"

#include <utility>

#include "core/status.h"

namespace kvs {

void BlockTable::advance(size_t n) {
  KVS_ASSERT(num_tokens_ + n <= blocks_.size() * block_size_, "advance to {} tokens with only {} blocks of {}",
             num_tokens_ + n, blocks_.size(), block_size_);
  num_tokens_ += n;
}

KvSlot BlockTable::slot_of(size_t position) const {
  KVS_ASSERT(position / block_size_ < blocks_.size(), "position {} beyond {} blocks of {}", position, blocks_.size(),
             block_size_);
  return KvSlot{blocks_[position / block_size_].value * block_size_ + position % block_size_};
}

std::vector<BlockId> BlockTable::take_blocks() {
  num_tokens_ = 0;
  return std::exchange(blocks_, {});
}

}  // namespace kvs
