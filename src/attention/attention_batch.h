// What attention reads for a batch of tokens, decided by the KV manager and the batch builder, not
// by the model: per sequence, the blocks to read and how many slots across them hold K/V; per
// token, how many of those slots it sees. A token's RoPE position is its own business (a window,
// sinks, evicted tokens or holes make slots and positions differ).
#pragma once

#include <cstdint>
#include <span>

#include "core/ids.h"
#include "kv/kv_layer_groups.h"
#include "kv/policies/slot_scores.h"

namespace kvs {

struct SequenceAttention {               // one per sequence in the batch
  std::span<const BlockId> blocks = {};  // the blocks to read, in order; kNullBlock = a hole, never read
  uint32_t num_cached = 0;               // slots holding K/V across `blocks` once this batch is written
  SlotMass slot_mass = {};               // null, or capacity >= num_cached: += attention probability of each slot
                                         // per layer and KV head, over its query heads and this batch's tokens (H2O)
  uint32_t window = 0;                   // > 0: the sequence's own window (a request's), where narrower than a layer's
};

struct AttentionBatch {
  std::span<const SequenceAttention> sequences;
  std::span<const uint32_t> sequence_of_token;  // [n] index into `sequences`
  // [n] token t attends over slots [0, visible_slots[t]) of its sequence (at most num_cached): causal
  // order is the caller's to state; for a chunk of new tokens it is cached + index + 1.
  std::span<const uint32_t> visible_slots;
  // [block id] -> its key tail or kNoKeyTail (the KV manager's): where keys quantized per channel of a
  // filling group wait (kv/key_tail_table.h). Empty when the keys have no tails.
  std::span<const uint32_t> key_tails = {};
};

}  // namespace kvs
