#include "attention/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "tensor/attention_ops.h"
#include "tensor/ops.h"

namespace kvs {

void paged_attention(const KvStorage& kv, size_t layer, std::span<const BlockId> block_table, size_t n_ctx,
                     const AttentionShape& shape, const float* q, float* out, size_t kv_head_begin, size_t kv_head_end,
                     std::span<float> scores) {
  const size_t hd = shape.head_dim;
  const size_t block_size = kv.shape().block_size;
  const size_t group = shape.num_heads / shape.num_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t num_blocks = (n_ctx + block_size - 1) / block_size;
  KVS_ASSERT(num_blocks <= block_table.size(), "context of {} tokens needs {} blocks, table has {}", n_ctx, num_blocks,
             block_table.size());
  KVS_ASSERT(scores.size() >= group * n_ctx, "score scratch {} < {} heads x context {}", scores.size(), group, n_ctx);
  const Isa isa = best_isa();

  // The group's query heads read each block of their KV head together: scores[h][position].
  for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
    const float* qg = q + g * group * hd;
    float* og = out + g * group * hd;
    for (size_t b = 0; b < num_blocks; ++b) {
      const size_t first = b * block_size;
      attention_block_scores(qg, group, kv.keys(layer, block_table[b], g), std::min(block_size, n_ctx - first), hd,
                             scale, &scores[first], n_ctx, isa);
    }
    for (size_t h = 0; h < group; ++h) softmax(scores.subspan(h * n_ctx, n_ctx), isa);
    std::memset(og, 0, group * hd * sizeof(float));
    for (size_t b = 0; b < num_blocks; ++b) {
      const size_t first = b * block_size;
      attention_block_values(&scores[first], n_ctx, group, kv.values(layer, block_table[b], g),
                             std::min(block_size, n_ctx - first), hd, og, isa);
    }
  }
}

}  // namespace kvs
