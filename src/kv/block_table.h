// One sequence's block table: block i holds its slots [i*block_size, (i+1)*block_size), slot p position p
// unless an eviction policy compacted them (then slots hold the kept tokens in order). It
// holds a reference to each of its blocks (PinnedBlocks: dropped tail first when the table dies),
// the token ids of the positions written so far (what the prefix index hashes), and for each full
// block its chained hash and the block that stands for its content in the prefix index (itself, or
// an indexed twin with the same content).
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"
#include "kv/block_pool.h"
#include "kv/prefix_index.h"

namespace kvs {

class BlockTable {
 public:
  BlockTable(size_t block_size, uint32_t name_space, size_t sequence_window = 0, bool evicts = false)
      : block_size_(block_size), name_space_(name_space), sequence_window_(sequence_window), evicts_(evicts) {}

  size_t block_size() const { return block_size_; }
  uint32_t name_space() const { return name_space_; }          // the cache salt's: where its prefixes are found
  size_t sequence_window() const { return sequence_window_; }  // > 0: the sequence's own sliding window (a request's)
  // Positions whose K/V are written: the sequence's one count of computed tokens.
  size_t num_tokens() const { return tokens_.size(); }
  // Under an eviction policy (evicts()): slots [0, num_slots()) hold the kept tokens' K/V in order, the
  // num_evicted() others are gone, and the token at position p >= num_tokens() goes to slot p - num_evicted().
  // Without one, slot i holds position i.
  bool evicts() const { return evicts_; }
  size_t num_evicted() const { return num_evicted_; }
  size_t num_slots() const { return tokens_.size() - num_evicted_; }
  std::span<const TokenId> tokens() const { return tokens_; }
  std::span<const BlockId> blocks() const { return blocks_.blocks(); }

  // Blocks to add so that `extra_tokens` more tokens fit.
  size_t blocks_needed(size_t extra_tokens) const {
    const size_t total = (num_slots() + extra_tokens + block_size_ - 1) / block_size_;
    return total > blocks_.size() ? total - blocks_.size() : 0;
  }
  void add_blocks(PinnedBlocks blocks) { blocks_.append(std::move(blocks)); }
  // Puts `single`'s block at index `block` (a private copy of a shared block), dropping the old one.
  void replace_block(size_t block, PinnedBlocks single) { blocks_.replace(block, std::move(single)); }
  // Lets go of block `block`, which becomes a hole (a sliding window has moved past it).
  void drop_block(size_t block) { blocks_.release_at(block); }
  // Forgets `count` slots (an eviction policy compacted the kept ones to the front) and lets go of the
  // blocks past the slots left.
  void evict(size_t count);
  // A table with the same tokens, hashes and blocks, each block shared (one more reference in `pool`).
  BlockTable fork(BlockPool& pool) const;
  // Records that `tokens` were written at the next positions; their blocks must be in the table.
  void advance(std::span<const TokenId> tokens);
  KvSlot slot_of(size_t position) const;

  // The full blocks [0, num_hashed()) have their hash and content reference; a full block past them
  // is still to be indexed.
  size_t num_hashed() const { return hashes_.size(); }
  const BlockHash& hash(size_t block) const { return hashes_.at(block); }
  // The content block `block` is the child of: the previous block's content, or the namespace's root.
  ContentRef parent_of(size_t block) const {
    return block == 0 ? ContentRef::root(name_space_) : contents_.at(block - 1);
  }
  void push_hash(const BlockHash& hash, ContentRef content) {
    hashes_.push_back(hash);
    contents_.push_back(content);
  }

 private:
  size_t block_size_;
  uint32_t name_space_;
  size_t sequence_window_ = 0;
  bool evicts_ = false;
  size_t num_evicted_ = 0;
  std::vector<TokenId> tokens_;
  PinnedBlocks blocks_;
  std::vector<BlockHash> hashes_;     // [full block]: chained hash
  std::vector<ContentRef> contents_;  // [full block]: the block (and generation) standing for its content
};

}  // namespace kvs
