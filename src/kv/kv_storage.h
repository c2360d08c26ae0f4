// The K/V bytes of a KV cache: for each layer, one K pool and one V pool laid out
// [block][kv_head][slot][head_dim] in elements of the cache's dtype (f32, f16 or bf16), so one
// head's keys for a block are contiguous for the dot products of decode. A contiguous per-sequence
// cache is the special case of one block whose size is the whole context. Which block belongs to
// which sequence is decided elsewhere (block pool and block tables); this class only stores. Rows
// are written by attention/write_kv (which rounds to the element type).
//
// Thread contract: distinct slots may be written from different threads at once (their bytes do not
// overlap); a slot is never written while a forward pass reads it (the engine writes a step's new
// slots before attention reads them, on the same pool job boundary).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/ids.h"
#include "core/kv_rows.h"
#include "kv/kv_sizing.h"

namespace kvs {

struct KvShape {
  size_t num_layers = 0;
  size_t num_kv_heads = 0;
  size_t head_dim = 0;
  size_t block_size = 16;  // tokens per block
  size_t num_blocks = 0;
  KvDType dtype = KvDType::kF32;  // element type of K and V: f32, f16 or bf16

  size_t elements_per_block() const { return num_kv_heads * block_size * head_dim; }
  size_t token_capacity() const { return num_blocks * block_size; }
  // The sizing description of this storage, shared with the calculator.
  KvCacheSpec spec() const {
    return {.num_layers = num_layers,
            .num_kv_heads = num_kv_heads,
            .head_dim = head_dim,
            .dtype = dtype,
            .block_size = block_size};
  }
};

// The tensor element type of a KV dtype KvStorage can hold (f32, f16, bf16); nullopt for the others.
std::optional<DType> kv_element_type(KvDType type);

// Global slot of a token = block id * block_size + offset within the block.
struct KvSlot {
  size_t value = 0;
};

class KvStorage {
 public:
  explicit KvStorage(const KvShape& shape);

  const KvShape& shape() const { return shape_; }
  size_t bytes() const;  // K and V of every layer: what was allocated, = num_blocks x kv_bytes_per_block

  DType element_type() const { return element_type_; }
  // Bytes of one head's keys (or values) in one block: block_size x head_dim elements.
  size_t head_block_bytes() const { return head_block_bytes_; }

  // The bytes of one head's key (or value) row at `slot` of `layer`: head_dim elements.
  std::byte* key_row(size_t layer, KvSlot slot, size_t kv_head) {
    return keys_[layer].data() + row_offset(slot, kv_head);
  }
  std::byte* value_row(size_t layer, KvSlot slot, size_t kv_head) {
    return values_[layer].data() + row_offset(slot, kv_head);
  }

  // Keys of one head in one block: [block_size][head_dim] elements, contiguous.
  KvRows keys(size_t layer, BlockId block, size_t kv_head) const {
    return {keys_[layer].data() + byte_offset(block, kv_head), element_type_};
  }
  KvRows values(size_t layer, BlockId block, size_t kv_head) const {
    return {values_[layer].data() + byte_offset(block, kv_head), element_type_};
  }

 private:
  size_t byte_offset(BlockId block, size_t kv_head) const {
    return (block.value * shape_.num_kv_heads + kv_head) * head_block_bytes_;
  }
  size_t row_offset(KvSlot slot, size_t kv_head) const;

  KvShape shape_;
  DType element_type_;
  size_t element_bytes_;
  size_t head_block_bytes_;
  std::vector<AlignedBuffer<std::byte>> keys_;    // per layer: num_blocks * elements_per_block elements
  std::vector<AlignedBuffer<std::byte>> values_;  // same layout as keys_
};

}  // namespace kvs
