// One sequence on a contiguous KV cache: a KvStorage of a single block as large as the sequence's
// capacity, so positions map straight to slots. The single-prompt path of `kvserve run` and
// `kvserve perplexity`, and the reference that paged variants are tested against.
#pragma once

#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/llama_forward.h"
#include "model/llama_model.h"

namespace kvs {

class SequenceRunner {
 public:
  // `capacity` tokens of K/V are allocated up front (at most the model's context length).
  SequenceRunner(const LlamaModel& model, ThreadPool& pool, size_t capacity, size_t max_batch_tokens = 512);

  // Feeds `tokens` as the next positions (in chunks of at most max_batch_tokens). Returns the
  // logits after the last token ([vocab]), or after every token ([tokens][vocab]) if all_logits.
  std::span<const float> append(std::span<const TokenId> tokens, bool all_logits = false);

  size_t length() const { return length_; }
  size_t capacity() const { return kv_.shape().token_capacity(); }
  size_t kv_bytes() const { return kv_.bytes(); }
  void reset() { length_ = 0; }

 private:
  const LlamaModel& model_;
  LlamaForward forward_;
  KvStorage kv_;
  size_t max_batch_tokens_;
  size_t length_ = 0;
  std::vector<float> logits_;
};

}  // namespace kvs
