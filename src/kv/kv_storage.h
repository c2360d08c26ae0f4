// The K/V bytes of a KV cache, laid out as its format says (kv/kv_format.h): for each layer one K
// pool and one V pool (MLA: one latent pool) of [block][kv_head] head-blocks, each head-block its
// rows [block_size][width] then its scales, so one head's keys for a block are contiguous for the dot
// products of decode. K and V may differ in element type and width. A contiguous per-sequence cache
// is the special case of one block whose size is the whole context. Which block belongs to which
// sequence is decided elsewhere (block pool and block tables); this class only stores, in memory
// from an injected allocator. Rows are written by attention/write_kv.
//
// Thread contract: writes go one block at a time (write_kv_run), and a block's bytes (rows and
// scales) are written by one thread at a time; distinct blocks may be written from different
// threads at once. A block is never written while a forward pass reads it (the engine writes a
// step's new slots before attention reads them, on a pool job boundary).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/ids.h"
#include "core/kv_rows.h"
#include "kv/kv_allocator.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_format.h"

namespace kvs {

class KvStorage {
 public:
  // Pools for `num_blocks` blocks of `spec` (which must be valid), from `allocator`, which is used
  // here only. The second form takes host RAM.
  KvStorage(const KvCacheSpec& spec, size_t num_blocks, KvAllocator& allocator);
  KvStorage(const KvCacheSpec& spec, size_t num_blocks);

  const KvCacheSpec& spec() const { return spec_; }
  const KvFormat& format() const { return format_; }
  size_t num_blocks() const { return num_blocks_; }
  size_t block_size() const { return spec_.block_size; }
  size_t token_capacity() const { return num_blocks_ * spec_.block_size; }
  bool has_values() const { return format_.v.has_value(); }  // false for an MLA latent
  size_t bytes() const;  // every pool of every layer: what was allocated, = num_blocks x kv_bytes_per_block

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

  KvCacheSpec spec_;
  KvFormat format_;
  size_t num_blocks_;
  Pools keys_;    // keys, or MLA's latent
  Pools values_;  // empty for MLA
};

}  // namespace kvs
