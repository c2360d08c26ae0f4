#include "attention/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "tensor/attention_ops.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

constexpr size_t kCacheLine = 64;

void prefetch_l2(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  for (size_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(p + offset, 0, 2);
}

}  // namespace

void paged_attention(const KvStorage& kv, size_t layer, std::span<const BlockId> block_table, size_t n_ctx,
                     const AttentionShape& shape, const float* q, float* out, size_t kv_head_begin, size_t kv_head_end,
                     std::span<float> scores) {
  const size_t hd = shape.head_dim;
  const size_t block_size = kv.shape().block_size;
  const size_t group = shape.num_heads / shape.num_kv_heads;
  const size_t heads = kv_head_end - kv_head_begin;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t num_blocks = (n_ctx + block_size - 1) / block_size;
  KVS_ASSERT(num_blocks <= block_table.size(), "context of {} tokens needs {} blocks, table has {}", n_ctx, num_blocks,
             block_table.size());
  KVS_ASSERT(kv_head_begin <= kv_head_end && kv_head_end <= shape.num_kv_heads, "KV heads [{}, {}) outside [0, {})",
             kv_head_begin, kv_head_end, shape.num_kv_heads);
  KVS_ASSERT(scores.size() >= heads * group * n_ctx, "score scratch {} < {} heads x {} x context {}", scores.size(),
             heads, group, n_ctx);
  const Isa isa = best_isa();
  const size_t head_block_bytes = kv.head_block_bytes();

  // Block by block, every KV head of the range in turn: a block's heads lie back to back in the pool
  // ([block][kv_head][slot][head_dim]), so each block is read as one sequential stream rather than one
  // short stream per head. scores[(g - kv_head_begin) * group + h][position] for query head h of KV head g.
  for (size_t g = kv_head_begin; g < kv_head_end; ++g)
    prefetch_l2(kv.keys(layer, block_table[0], g).data, head_block_bytes);
  for (size_t b = 0; b < num_blocks; ++b) {
    const size_t first = b * block_size, count = std::min(block_size, n_ctx - first);
    for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
      // Ahead of use, into L2: this head's keys of the next block and its values of this block (read
      // after the softmax). The blocks of a context lie anywhere in the pool, so the hardware prefetcher
      // cannot find the next one.
      if (b + 1 < num_blocks) prefetch_l2(kv.keys(layer, block_table[b + 1], g).data, head_block_bytes);
      prefetch_l2(kv.values(layer, block_table[b], g).data, head_block_bytes);
      attention_block_scores(q + g * group * hd, group, kv.keys(layer, block_table[b], g), count, hd, scale,
                             &scores[(g - kv_head_begin) * group * n_ctx + first], n_ctx, isa);
    }
  }
  for (size_t h = 0; h < heads * group; ++h) softmax(scores.subspan(h * n_ctx, n_ctx), isa);
  std::memset(out + kv_head_begin * group * hd, 0, heads * group * hd * sizeof(float));
  for (size_t b = 0; b < num_blocks; ++b) {
    const size_t first = b * block_size, count = std::min(block_size, n_ctx - first);
    for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
      attention_block_values(&scores[(g - kv_head_begin) * group * n_ctx + first], n_ctx, group,
                             kv.values(layer, block_table[b], g), count, hd, out + g * group * hd, isa);
    }
  }
}

}  // namespace kvs
