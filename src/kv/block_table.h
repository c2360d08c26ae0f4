// One sequence's block table: block i holds its positions [i*block_size, (i+1)*block_size).
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"
#include "kv/kv_storage.h"

namespace kvs {

class BlockTable {
 public:
  explicit BlockTable(size_t block_size) : block_size_(block_size) {}

  size_t block_size() const { return block_size_; }
  size_t num_tokens() const { return num_tokens_; }
  std::span<const BlockId> blocks() const { return blocks_; }

  // Blocks to add so that `extra_tokens` more tokens fit.
  size_t blocks_needed(size_t extra_tokens) const {
    const size_t total = (num_tokens_ + extra_tokens + block_size_ - 1) / block_size_;
    return total > blocks_.size() ? total - blocks_.size() : 0;
  }
  void add_blocks(std::span<const BlockId> blocks) { blocks_.insert(blocks_.end(), blocks.begin(), blocks.end()); }
  // Marks `n` more positions as written; their blocks must already be in the table.
  void advance(size_t n);
  KvSlot slot_of(size_t position) const;
  // Gives up every block (for the caller to release) and empties the table.
  std::vector<BlockId> take_blocks();

 private:
  size_t block_size_;
  size_t num_tokens_ = 0;
  std::vector<BlockId> blocks_;
};

}  // namespace kvs
