// Attention over a whole batch: every token's query heads against its sequence's cached K/V, split
// over the thread pool by cost (an item's cost is about its visible slots, and a batch of decode
// tokens has contexts of every length, so items are cut into runs of equal total cost, not count).
#pragma once

#include <span>
#include <vector>

#include "attention/attention_batch.h"
#include "attention/paged_attention.h"
#include "core/thread_pool.h"
#include "kv/kv_storage.h"

namespace kvs {

class BatchAttention {
 public:
  BatchAttention(ThreadPool& pool, const AttentionShape& shape)
      : pool_(pool), shape_(shape), scores_(pool.num_threads()) {}

  // q: [n][num_heads * head_dim], out: [n][num_heads * value_width] for the batch's n tokens. Results do not depend on
  // the split. window > 0: a sliding window, each token sees only the last `window` of its visible slots (itself
  // included), which are its last `window` positions while slot i holds position i; a sequence's own window
  // (SequenceAttention::window) narrows it further.
  void run(const KvStorage& kv, size_t layer, const AttentionBatch& batch, std::span<const float> q,
           std::span<float> out, size_t window = 0);

 private:
  ThreadPool& pool_;
  AttentionShape shape_;
  std::vector<std::vector<float>> scores_;  // per thread: [query heads of a call][visible slots]
  std::vector<size_t> cost_;                // [n + 1]: cumulative cost of the tokens' attention
};

}  // namespace kvs
