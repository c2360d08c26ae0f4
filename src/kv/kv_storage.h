// The K/V bytes of a KV cache, laid out as its format says (kv/kv_format.h): for each layer one K
// pool and one V pool (MLA: one latent pool) of [block][kv_head] head-blocks, each head-block its
// rows [block_size][width] then its scales, so one head's keys for a block are contiguous for the dot
// products of decode. K and V may differ in element type and width. A contiguous per-sequence cache
// is the special case of one block whose size is the whole context. Which block belongs to which
// sequence is decided elsewhere (block pool and block tables); this class only stores, in memory
// from an injected allocator. Rows are written by attention/write_kv. With keys quantized per channel
// it also holds the key tails (kv/key_tail_table.h: which block holds which is the KV manager's).
//
// Thread contract: writes go one block at a time (write_kv_run), and a block's bytes (rows and
// scales) are written by one thread at a time; distinct blocks may be written from different
// threads at once. A block is never written while a forward pass reads it (the engine writes a
// step's new slots before attention reads them, on a pool job boundary).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/kv_rows.h"
#include "kv/kv_allocator.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_format.h"

namespace kvs {

class KvStorage {
 public:
  // Pools for `num_blocks` blocks of `spec` (which must be valid) and `num_key_tails` key tails (none
  // unless the format has them), from `allocator`, which is used here only. The second form takes host RAM.
  KvStorage(const KvCacheSpec& spec, size_t num_blocks, size_t num_key_tails, KvAllocator& allocator);
  KvStorage(const KvCacheSpec& spec, size_t num_blocks, size_t num_key_tails = 0);

  const KvCacheSpec& spec() const { return spec_; }
  const KvFormat& format() const { return format_; }
  size_t num_blocks() const { return num_blocks_; }
  size_t block_size() const { return spec_.block_size; }
  size_t token_capacity() const { return num_blocks_ * spec_.block_size; }
  bool has_values() const { return format_.v.has_value(); }  // false for an MLA latent
  size_t num_key_tails() const { return num_key_tails_; }
  // Everything allocated: every pool of every layer and the key tails, = num_blocks x kv_bytes_per_block
  // + num_key_tails x kv_key_tail_bytes.
  size_t bytes() const;

  // The bytes of one head's key (or value) row at `slot` of `layer`: format().k.row_bytes().
  std::byte* key_row(size_t layer, KvSlot slot, size_t kv_head) { return row(keys_, layer, slot, kv_head); }
  std::byte* value_row(size_t layer, KvSlot slot, size_t kv_head) { return row(values_, layer, slot, kv_head); }
  // One head's whole head-block (rows, then scales) in `block`, for the write path of quantized rows.
  std::byte* key_head_block(size_t layer, BlockId block, size_t kv_head) {
    return head_block(keys_, layer, block, kv_head);
  }
  std::byte* value_head_block(size_t layer, BlockId block, size_t kv_head) {
    return head_block(values_, layer, block, kv_head);
  }

  // Copies slots [0, num_slots) of `source` into `destination`, every layer, K and V (quantized
  // formats: the head-blocks' scales too): a prefix hit's partial block. Not while a forward pass runs.
  void copy_slots(BlockId source, BlockId destination, size_t num_slots);

  // One block's bytes as one buffer (the offload tiers' unit): for each layer its K head-blocks, then its V
  // head-blocks (none for MLA), = kv_bytes_per_block(spec).total(). A full block only: it holds no key tail.
  size_t block_bytes() const;
  void read_block(BlockId block, std::span<std::byte> out) const;
  void write_block(BlockId block, std::span<const std::byte> bytes);

  // Key tail `tail` of one layer and head: [group_size rows][width] fp16, row i the group's row i.
  uint16_t* key_tail(uint32_t tail, size_t layer, size_t kv_head);
  KvRows key_tail_rows(uint32_t tail, size_t layer, size_t kv_head) const;
  // Copies every layer's and head's rows of one key tail into another (a block copied on write).
  void copy_key_tail(uint32_t source, uint32_t destination);

  // Keys of one head in one block: its head-block, rows [block_size][width] first.
  KvRows keys(size_t layer, BlockId block, size_t kv_head) const { return rows(keys_, layer, block, kv_head); }
  KvRows values(size_t layer, BlockId block, size_t kv_head) const { return rows(values_, layer, block, kv_head); }

 private:
  struct Pools {
    KvTensorFormat format = {};
    std::vector<std::unique_ptr<KvRegion>> layers = {};  // [layer]: num_blocks x num_heads head-blocks
    std::vector<std::byte*> base = {};                   // [layer]: the region's first byte
  };
  void allocate_pools(KvAllocator& allocator);
  Pools allocate(const KvTensorFormat& format, KvAllocator& allocator) const;
  std::byte* head_block(const Pools& pools, size_t layer, BlockId block, size_t kv_head) const;
  std::byte* row(Pools& pools, size_t layer, KvSlot slot, size_t kv_head);
  KvRows rows(const Pools& pools, size_t layer, BlockId block, size_t kv_head) const;

  size_t key_tail_offset(uint32_t tail, size_t layer, size_t kv_head) const;  // in fp16 elements
  // visit(first byte, offset in the block buffer, bytes) for each layer's K and V part of `block`.
  template <typename Visit>
  void for_each_block_part(BlockId block, size_t expected_bytes, Visit visit) const;

  KvCacheSpec spec_;
  KvFormat format_;
  size_t num_blocks_;
  size_t num_key_tails_;
  std::unique_ptr<KvRegion> key_tails_;  // [tail][layer][kv_head][group_size][width] fp16; null without tails
  Pools keys_;                           // keys, or MLA's latent
  Pools values_;                         // empty for MLA
};

}  // namespace kvs
