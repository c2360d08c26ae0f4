// Identifier types. Token ids stay plain int32 (they fill large arrays and match GGUF's int32
// token ids); ids of KV objects are distinct types so they cannot be mixed up.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>

namespace kvs {

using TokenId = int32_t;

struct BlockId {
  uint32_t value = 0;
  auto operator<=>(const BlockId&) const = default;
};

// A hole in a block table: its slots hold nothing and attention skips them (a window that slid
// past them, evicted tokens). Never allocated by a pool.
inline constexpr BlockId kNullBlock{UINT32_MAX};

// A block without a key tail (kv/key_tail_table.h).
inline constexpr uint32_t kNoKeyTail = UINT32_MAX;

// Where one token's K/V lie in a KV pool: block id * block_size + offset within the block.
struct KvSlot {
  size_t value = 0;
};

struct SeqId {
  uint64_t value = 0;
  auto operator<=>(const SeqId&) const = default;
};

}  // namespace kvs
