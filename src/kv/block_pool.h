// Metadata of the fixed-size KV blocks (ref count, content hash, last use, free-list links),
// kept apart from the K/V bytes (KvStorage). The free list is intrusive and doubly linked, so
// taking a block, returning one, and pulling a cached block back out are all O(1).
//
// Invariant: a block is on the free list iff its ref count is zero. Blocks are taken from the
// head and returned to the tail, so the head is always the least recently released block (the
// first to evict once released blocks keep cached content for prefix reuse).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace kvs {

struct BlockMeta {
  uint32_t ref_count = 0;
  uint64_t content_hash = 0;   // 0: holds no reusable (full, hashed) content
  uint64_t last_access = 0;    // logical time of the last release
  uint32_t prev_free = kNone;  // free-list links; kNone when not linked
  uint32_t next_free = kNone;
  static constexpr uint32_t kNone = UINT32_MAX;
};

class BlockPool {
 public:
  explicit BlockPool(size_t num_blocks);

  size_t num_blocks() const { return meta_.size(); }
  size_t num_free_blocks() const { return num_free_; }
  size_t num_used_blocks() const { return num_blocks() - num_free_; }

  // Takes n blocks from the head of the free list, each with ref count 1; all or nothing.
  // Exhaustion is an expected outcome: nullopt, and the pool is unchanged.
  std::optional<std::vector<BlockId>> allocate(size_t n);
  // Adds a reference to a block in use, or pulls a free (cached) block back into use.
  void retain(BlockId id);
  // Drops one reference; at zero the block goes to the tail of the free list.
  void release(BlockId id);

  const BlockMeta& meta(BlockId id) const {
    KVS_ASSERT(id.value < meta_.size(), "block {} in a pool of {}", id.value, meta_.size());
    return meta_[id.value];
  }
  void set_content_hash(BlockId id, uint64_t hash) { meta_.at(id.value).content_hash = hash; }
  // Free blocks from head to tail (tests assert exact order).
  std::vector<BlockId> free_list() const;
  // Verifies every invariant; a non-ok Status says which block breaks which rule.
  Status check_invariants() const;

 private:
  void unlink(uint32_t index);
  void push_tail(uint32_t index);

  std::vector<BlockMeta> meta_;
  uint32_t head_ = BlockMeta::kNone;
  uint32_t tail_ = BlockMeta::kNone;
  size_t num_free_ = 0;
  uint64_t clock_ = 0;  // logical time, advanced by every release
};

// References to blocks of a pool, dropped when the handle dies (or on release()), the last block first:
// a sequence's tail reaches the free list before its head, so the longest cached prefixes are evicted
// last. Holes (kNullBlock) hold no reference. Move-only; the pool must outlive it.
class PinnedBlocks {
 public:
  PinnedBlocks() = default;
  // Takes over one reference to each block (e.g. fresh from BlockPool::allocate).
  PinnedBlocks(BlockPool& pool, std::vector<BlockId> adopted) : pool_(&pool), blocks_(std::move(adopted)) {}
  // Adds a reference to each block (sharing blocks another holder keeps).
  static PinnedBlocks retain(BlockPool& pool, std::span<const BlockId> blocks);
  PinnedBlocks(PinnedBlocks&& other) noexcept;
  PinnedBlocks& operator=(PinnedBlocks&& other) noexcept;
  PinnedBlocks(const PinnedBlocks&) = delete;
  PinnedBlocks& operator=(const PinnedBlocks&) = delete;
  ~PinnedBlocks() { release(); }

  std::span<const BlockId> blocks() const { return blocks_; }
  size_t size() const { return blocks_.size(); }
  // Appends another handle's blocks (same pool), taking over its references.
  void append(PinnedBlocks&& other);
  void append_hole() { blocks_.push_back(kNullBlock); }
  // Drops every reference, tail first, and empties the handle.
  void release();

 private:
  BlockPool* pool_ = nullptr;
  std::vector<BlockId> blocks_;
};

}  // namespace kvs
