// Metadata of the fixed-size KV blocks (ref count, content hash, last use, free-list links),
// kept apart from the K/V bytes (KvStorage). The free list is intrusive and doubly linked, so
// taking a block, returning one, and pulling a cached block back out are all O(1).
//
// Invariant: a block is on the free list iff its ref count is zero. Blocks are taken from the
// head. A released block that holds cached content (content_hash != 0: the prefix index can hand it
// out again) goes to the tail, so among cached blocks the head is the least recently released, the
// first to evict; a block without content goes to the head, to be reused before any cached one.
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
  uint32_t generation = 0;     // + 1 each time the block is allocated for new content
  uint64_t content_hash = 0;   // 0: holds no content the prefix index hands out; else its hash's low bits
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
  size_t peak_used_blocks() const { return peak_used_; }  // the most blocks in use at once so far
  // Free blocks that still hold cached content (counted in num_free_blocks: taking one evicts it).
  size_t num_cached_free_blocks() const { return num_cached_free_; }

  // Takes n blocks from the head of the free list, each with ref count 1, its content dropped and its
  // generation advanced; all or nothing. Exhaustion is an expected outcome: nullopt, and the pool is
  // unchanged. The caller forgets what it indexed of the blocks whose content_hash was set.
  std::optional<std::vector<BlockId>> allocate(size_t n);
  // Adds a reference to a block in use, or pulls a free (cached) block back into use.
  void retain(BlockId id);
  // Drops one reference; at zero the block goes to the tail of the free list.
  void release(BlockId id);

  const BlockMeta& meta(BlockId id) const {
    KVS_ASSERT(id.value < meta_.size(), "block {} in a pool of {}", id.value, meta_.size());
    return meta_[id.value];
  }
  // Marks a block in use as holding cached content (hash != 0), kept at the LRU tail when released.
  void set_content_hash(BlockId id, uint64_t hash);
  // Drops the content of every free block holding cached content (each moves to the head of the free list, its
  // generation advanced, as allocate() would); returns them, for the caller to forget what it indexed of them.
  std::vector<BlockId> forget_cached_content();
  // Free blocks from head to tail (tests assert exact order).
  std::vector<BlockId> free_list() const;
  // Verifies every invariant; a non-ok Status says which block breaks which rule.
  Status check_invariants() const;

 private:
  void unlink(uint32_t index);
  void push_tail(uint32_t index);
  void push_head(uint32_t index);

  std::vector<BlockMeta> meta_;
  uint32_t head_ = BlockMeta::kNone;
  uint32_t tail_ = BlockMeta::kNone;
  size_t num_free_ = 0;
  size_t num_cached_free_ = 0;  // free blocks with content_hash != 0
  size_t peak_used_ = 0;
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
  // Puts the one block of `single` (same pool) at `index`, taking over its reference and dropping
  // this handle's reference to the block that was there.
  void replace(size_t index, PinnedBlocks&& single);
  // Drops this handle's reference to the block at `index`, which becomes a hole (kNullBlock).
  void release_at(size_t index);
  // Drops the references to the blocks from `keep` on, tail first, and forgets them.
  void truncate(size_t keep);
  // Drops every reference, tail first, and empties the handle.
  void release();

 private:
  BlockPool* pool_ = nullptr;
  std::vector<BlockId> blocks_;
};

}  // namespace kvs
