#include "kv/block_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace kvs {

BlockPool::BlockPool(size_t num_blocks) : meta_(num_blocks) {
  KVS_ASSERT(num_blocks < BlockMeta::kNone, "pool of {} blocks is too large", num_blocks);
  for (uint32_t i = 0; i < num_blocks; ++i) push_tail(i);
}

void BlockPool::unlink(uint32_t i) {
  BlockMeta& m = meta_[i];
  (m.prev_free == BlockMeta::kNone ? head_ : meta_[m.prev_free].next_free) = m.next_free;
  (m.next_free == BlockMeta::kNone ? tail_ : meta_[m.next_free].prev_free) = m.prev_free;
  m.prev_free = m.next_free = BlockMeta::kNone;
  --num_free_;
  peak_used_ = std::max(peak_used_, num_used_blocks());
  if (m.content_hash != 0) --num_cached_free_;
}

void BlockPool::push_tail(uint32_t i) {
  BlockMeta& m = meta_[i];
  m.prev_free = tail_;
  m.next_free = BlockMeta::kNone;
  (tail_ == BlockMeta::kNone ? head_ : meta_[tail_].next_free) = i;
  tail_ = i;
  ++num_free_;
  if (m.content_hash != 0) ++num_cached_free_;
}

void BlockPool::push_head(uint32_t i) {
  BlockMeta& m = meta_[i];
  m.prev_free = BlockMeta::kNone;
  m.next_free = head_;
  (head_ == BlockMeta::kNone ? tail_ : meta_[head_].prev_free) = i;
  head_ = i;
  ++num_free_;
  if (m.content_hash != 0) ++num_cached_free_;
}

std::optional<std::vector<BlockId>> BlockPool::allocate(size_t n) {
  if (n > num_free_) return std::nullopt;
  std::vector<BlockId> out;
  out.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = head_;
    unlink(i);
    meta_[i].ref_count = 1;
    meta_[i].content_hash = 0;  // reusing a block for new content evicts the old content
    ++meta_[i].generation;
    out.push_back(BlockId{i});
  }
  return out;
}

std::vector<BlockId> BlockPool::forget_cached_content() {
  std::vector<BlockId> out;
  for (uint32_t i = head_; i != BlockMeta::kNone; i = meta_[i].next_free)
    if (meta_[i].content_hash != 0) out.push_back(BlockId{i});
  for (BlockId b : out) {
    unlink(b.value);
    meta_[b.value].content_hash = 0;
    ++meta_[b.value].generation;
    push_head(b.value);
  }
  return out;
}

void BlockPool::retain(BlockId id) {
  KVS_ASSERT(id.value < meta_.size(), "retain of block {} in a pool of {}", id.value, meta_.size());
  BlockMeta& m = meta_[id.value];
  if (m.ref_count == 0) unlink(id.value);
  ++m.ref_count;
}

void BlockPool::release(BlockId id) {
  KVS_ASSERT(id.value < meta_.size(), "release of block {} in a pool of {}", id.value, meta_.size());
  BlockMeta& m = meta_[id.value];
  KVS_ASSERT(m.ref_count > 0, "release of free block {}", id.value);
  if (--m.ref_count == 0) {
    m.last_access = ++clock_;
    if (m.content_hash != 0) {
      push_tail(id.value);
    } else {
      push_head(id.value);
    }
  }
}

void BlockPool::set_content_hash(BlockId id, uint64_t hash) {
  KVS_ASSERT(id.value < meta_.size() && meta_[id.value].ref_count > 0, "content hash set on free block {}", id.value);
  meta_[id.value].content_hash = hash;
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> out;
  for (uint32_t i = head_; i != BlockMeta::kNone; i = meta_[i].next_free) out.push_back(BlockId{i});
  return out;
}

Status BlockPool::check_invariants() const {
  size_t linked = 0;
  uint32_t prev = BlockMeta::kNone;
  for (uint32_t i = head_; i != BlockMeta::kNone; i = meta_[i].next_free) {
    if (i >= meta_.size()) return Status::corrupt(fmt::format("free list links to block {} of {}", i, meta_.size()));
    if (meta_[i].ref_count != 0) {
      return Status::corrupt(fmt::format("block {} is on the free list with ref count {}", i, meta_[i].ref_count));
    }
    if (meta_[i].prev_free != prev) {
      return Status::corrupt(fmt::format("block {} has prev link {} but follows {}", i, meta_[i].prev_free, prev));
    }
    if (++linked > meta_.size()) return Status::corrupt("free list has a cycle");
    prev = i;
  }
  if (prev != tail_) return Status::corrupt(fmt::format("free list ends at {} but tail is {}", prev, tail_));
  size_t zero_refs = 0, cached_free = 0;
  for (const BlockMeta& m : meta_) {
    zero_refs += m.ref_count == 0;
    cached_free += m.ref_count == 0 && m.content_hash != 0;
  }
  if (cached_free != num_cached_free_) {
    return Status::corrupt(
        fmt::format("{} free blocks hold content but the count says {}", cached_free, num_cached_free_));
  }
  if (linked != num_free_ || zero_refs != num_free_) {
    return Status::corrupt(
        fmt::format("free count {} but {} blocks linked and {} with ref count 0", num_free_, linked, zero_refs));
  }
  return Status::ok();
}

PinnedBlocks PinnedBlocks::retain(BlockPool& pool, std::span<const BlockId> blocks) {
  for (BlockId b : blocks)
    if (b != kNullBlock) pool.retain(b);
  return PinnedBlocks(pool, std::vector<BlockId>(blocks.begin(), blocks.end()));
}

PinnedBlocks::PinnedBlocks(PinnedBlocks&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), blocks_(std::exchange(other.blocks_, {})) {}

PinnedBlocks& PinnedBlocks::operator=(PinnedBlocks&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    blocks_ = std::exchange(other.blocks_, {});
  }
  return *this;
}

void PinnedBlocks::append(PinnedBlocks&& other) {
  if (other.blocks_.empty()) return;
  KVS_ASSERT(pool_ == nullptr || other.pool_ == nullptr || pool_ == other.pool_, "blocks of two pools in one handle");
  if (pool_ == nullptr) pool_ = other.pool_;
  blocks_.insert(blocks_.end(), other.blocks_.begin(), other.blocks_.end());
  other.blocks_.clear();
  other.pool_ = nullptr;
}

void PinnedBlocks::replace(size_t index, PinnedBlocks&& single) {
  KVS_ASSERT(index < blocks_.size() && single.size() == 1, "replace block {} of {} with {} blocks", index,
             blocks_.size(), single.size());
  KVS_ASSERT(pool_ == single.pool_, "blocks of two pools in one handle");
  if (blocks_[index] != kNullBlock) pool_->release(blocks_[index]);
  blocks_[index] = single.blocks_[0];
  single.blocks_.clear();
  single.pool_ = nullptr;
}

void PinnedBlocks::release_at(size_t index) {
  KVS_ASSERT(index < blocks_.size(), "release block {} of {}", index, blocks_.size());
  if (blocks_[index] != kNullBlock) pool_->release(std::exchange(blocks_[index], kNullBlock));
}

void PinnedBlocks::truncate(size_t keep) {
  while (blocks_.size() > keep) {
    if (blocks_.back() != kNullBlock) pool_->release(blocks_.back());
    blocks_.pop_back();
  }
}

void PinnedBlocks::release() {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    if (*it != kNullBlock) pool_->release(*it);
  blocks_.clear();
}

}  // namespace kvs
