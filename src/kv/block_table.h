// One sequence's block table: block i holds its positions [i*block_size, (i+1)*block_size). It
// holds a reference to each of its blocks (PinnedBlocks: dropped tail first when the table dies),
// and the token ids of the positions written so far (what a prefix index hashes).
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"
#include "kv/block_pool.h"

namespace kvs {

class BlockTable {
 public:
  explicit BlockTable(size_t block_size) : block_size_(block_size) {}

  size_t block_size() const { return block_size_; }
  // Positions whose K/V are written: the sequence's one count of computed tokens.
  size_t num_tokens() const { return tokens_.size(); }
  std::span<const TokenId> tokens() const { return tokens_; }
  std::span<const BlockId> blocks() const { return blocks_.blocks(); }

  // Blocks to add so that `extra_tokens` more tokens fit.
  size_t blocks_needed(size_t extra_tokens) const {
    const size_t total = (num_tokens() + extra_tokens + block_size_ - 1) / block_size_;
    return total > blocks_.size() ? total - blocks_.size() : 0;
  }
  void add_blocks(PinnedBlocks blocks) { blocks_.append(std::move(blocks)); }
  // Records that `tokens` were written at the next positions; their blocks must be in the table.
  void advance(std::span<const TokenId> tokens);
  KvSlot slot_of(size_t position) const;

 private:
  size_t block_size_;
  std::vector<TokenId> tokens_;
  PinnedBlocks blocks_;
};

}  // namespace kvs
