// Per-ISA versions of the attention block kernels behind attention_ops.cpp's dispatch.
#pragma once

#include <cstddef>

namespace kvs::detail {

void attention_block_scores_avx2(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim,
                                 float scale, float* scores, size_t stride);
void attention_block_values_avx2(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                                 size_t head_dim, float* out);

void attention_block_scores_avx512(const float* q, size_t nq, const float* keys, size_t count, size_t head_dim,
                                   float scale, float* scores, size_t stride);
void attention_block_values_avx512(const float* probs, size_t stride, size_t nq, const float* values, size_t count,
                                   size_t head_dim, float* out);

}  // namespace kvs::detail
