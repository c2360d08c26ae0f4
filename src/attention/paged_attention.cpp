#include "attention/paged_attention.h"

#include <cmath>
#include <cstring>

#include "core/status.h"
#include "tensor/ops.h"

namespace kvs {

void paged_attention(const KvStorage& kv, size_t layer, std::span<const BlockId> block_table, size_t n_ctx,
                     const AttentionShape& shape, const float* q, float* out, size_t kv_head_begin,
                     size_t kv_head_end, std::span<float> scores) {
  const size_t hd = shape.head_dim;
  const size_t block_size = kv.shape().block_size;
  const size_t group = shape.num_heads / shape.num_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t num_blocks = (n_ctx + block_size - 1) / block_size;
  KVS_ASSERT(num_blocks <= block_table.size(), "context of {} tokens needs {} blocks, table has {}", n_ctx,
             num_blocks, block_table.size());
  KVS_ASSERT(scores.size() >= n_ctx, "score scratch {} < context {}", scores.size(), n_ctx);
  const Isa isa = best_isa();

  for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
    for (size_t h = g * group; h < (g + 1) * group; ++h) {
      const float* qh = q + h * hd;
      // Scores over every cached position, block by block.
      for (size_t b = 0; b < num_blocks; ++b) {
        const float* keys = kv.keys(layer, block_table[b], g);
        const size_t first = b * block_size;
        const size_t count = std::min(block_size, n_ctx - first);
        for (size_t s = 0; s < count; ++s) scores[first + s] = dot_f32(qh, keys + s * hd, hd, isa) * scale;
      }
      softmax(scores.first(n_ctx), isa);
      float* oh = out + h * hd;
      std::memset(oh, 0, hd * sizeof(float));
      for (size_t b = 0; b < num_blocks; ++b) {
        const float* values = kv.values(layer, block_table[b], g);
        const size_t first = b * block_size;
        const size_t count = std::min(block_size, n_ctx - first);
        for (size_t s = 0; s < count; ++s) axpy_f32(scores[first + s], values + s * hd, oh, hd, isa);
      }
    }
  }
}

}  // namespace kvs
