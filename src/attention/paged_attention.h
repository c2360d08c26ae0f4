// Causal attention of one query token over its sequence's cached K/V, read block by block
// through the block table. With one block per sequence this is the contiguous-cache case.
#pragma once

#include <cstddef>
#include <span>

#include "core/ids.h"
#include "kv/kv_storage.h"

namespace kvs {

struct AttentionShape {
  size_t num_heads = 0;     // query heads
  size_t num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  size_t head_dim = 0;
};

// For every query head of KV heads [kv_head_begin, kv_head_end):
//   out[h] = softmax(q[h] . K[0..n_ctx) / sqrt(head_dim)) . V[0..n_ctx)
// q, out: [num_heads][head_dim]; scores: scratch of at least (kv_head_end - kv_head_begin) x
// (num_heads / num_kv_heads) x n_ctx floats. Each head's result does not depend on the range it is
// computed in (the same sums in the same order).
void paged_attention(const KvStorage& kv, size_t layer, std::span<const BlockId> block_table, size_t n_ctx,
                     const AttentionShape& shape, const float* q, float* out, size_t kv_head_begin, size_t kv_head_end,
                     std::span<float> scores);

}  // namespace kvs
