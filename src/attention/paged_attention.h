// Causal attention of one query token over its sequence's cached K/V, read block by block
// through the block list. With one block per sequence this is the contiguous-cache case.
#pragma once

#include <cstddef>
#include <span>

#include "core/ids.h"
#include "kv/kv_storage.h"
#include "kv/policies/slot_scores.h"

namespace kvs {

struct AttentionShape {
  size_t num_heads = 0;     // query heads
  size_t num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  size_t head_dim = 0;      // width of a query and key row
  size_t v_head_dim = 0;    // width of a value (and output) row; 0: head_dim (MLA's V is narrower than K)

  size_t value_width() const { return v_head_dim == 0 ? head_dim : v_head_dim; }
};

// The slots one token attends over: slots [first_slot, num_slots) across `blocks` (block i holds slots
// [i * block_size, (i + 1) * block_size)). A kNullBlock's slots are skipped (probability 0), and so are
// the blocks wholly before first_slot (a sliding window's dropped blocks may be holes); at least one
// visible slot must lie in a real block.
struct PagedContext {
  std::span<const BlockId> blocks;
  size_t num_slots = 0;
  size_t first_slot = 0;  // a sliding window's first slot: earlier slots get probability 0
  SlotMass slot_mass =
      {};  // null, or capacity >= num_slots: row (layer, g) += each slot's probability over g's query heads
  // Keys quantized per channel: slots from key_tail_first on (in the last block) are read from key
  // tail `key_tail` (fp16) in place of their block's rows; kNoKeyTail when no group is filling.
  uint32_t key_tail = kNoKeyTail;
  size_t key_tail_first = 0;
};

// Slots a call scores: from the start of first_slot's block to num_slots.
inline size_t paged_score_slots(const PagedContext& context, size_t block_size) {
  return context.num_slots - context.first_slot / block_size * block_size;
}

// Which query heads of each KV head's group a call computes: [begin, end) of the group; end 0, the whole group.
// BatchAttention splits groups when a batch has fewer (token, KV head) pairs than threads (batch-1 MQA or MLA decode).
struct GroupSlice {
  size_t begin = 0;
  size_t end = 0;
};

// For every query head of KV heads [kv_head_begin, kv_head_end) (those of `slice` in each group):
//   out[h] = softmax(q[h] . K[slots] / sqrt(head_dim)) . V[slots]
// q: [num_heads][head_dim], out: [num_heads][value_width]; scores: scratch of at least (kv_head_end - kv_head_begin) x
// (query heads of the slice) x paged_score_slots(context, block size) floats, and as many times head_dim more when
// the keys are stored rotated. Each head's result does not depend on the range it is computed in (the same sums in
// the same order). slot_mass is added to atomically (other threads may be adding for other tokens of the same
// sequence), in fixed point, so its sums do not depend on the order.
void paged_attention(const KvStorage& kv, size_t layer, const PagedContext& context, const AttentionShape& shape,
                     const float* q, float* out, size_t kv_head_begin, size_t kv_head_end, std::span<float> scores,
                     GroupSlice slice = {});

}  // namespace kvs
