// Which block holds which key tail. Keys quantized per channel share one (scale, min) per channel
// over a group of rows (kv/kv_format.h), so a group is quantized only when its last row is written;
// until then its rows wait in a key tail, fp16 rows that attention reads in their place. A tail
// belongs to a block, the one where a sequence's group is filling (shared with it: a fork's partial
// last block shares its tail until copied on write). The KV storage holds the tails' bytes; this
// table, kept by the KV manager, only says which tail is whose and hands out the free ones.
//
// Invariants: every tail is either free or held by exactly one block; no block holds two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace kvs {

class KeyTailTable {
 public:
  KeyTailTable(size_t num_tails, size_t num_blocks);

  size_t num_tails() const { return num_tails_; }
  size_t num_free() const { return free_.size(); }
  size_t num_used() const { return num_tails_ - free_.size(); }
  // The tail of `block`, or kNoKeyTail.
  uint32_t tail_of(BlockId block) const { return tail_of_[block.value]; }
  // [block id] -> its tail or kNoKeyTail: what the write path and attention look up.
  std::span<const uint32_t> by_block() const { return tail_of_; }
  // Gives `block` a tail unless it has one; false, with nothing changed, when none is free.
  [[nodiscard]] bool assign(BlockId block);
  // Takes `block`'s tail back, if it has one.
  void release(BlockId block);

  Status check_invariants() const;

 private:
  size_t num_tails_;
  std::vector<uint32_t> tail_of_;  // [block]
  std::vector<uint32_t> free_;     // free tails, the next one handed out last
};

}  // namespace kvs
