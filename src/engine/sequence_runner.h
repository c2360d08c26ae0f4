// One sequence run through the model with its own KV cache: paged (a KvCacheManager whose blocks
// are allocated as the sequence grows) by default, or contiguous (one block spanning the whole
// capacity, the reference layout that paged attention is tested against). The single-prompt path
// of `kvserve run`, `kvserve perplexity` and `kvserve bench`.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_cache_manager.h"
#include "model/llama_forward.h"
#include "model/llama_model.h"

namespace kvs {

struct SequenceKvOptions {
  size_t block_size = 16;         // tokens per block; 0 = contiguous (one block of `capacity` tokens)
  size_t num_blocks = 0;          // pool size; 0 = exactly the blocks `capacity` tokens need
  KvDType dtype = KvDType::kF32;  // K/V element type: f32, f16 or bf16
};

class SequenceRunner {
 public:
  // Room for `capacity` tokens (at most the model's context length) unless num_blocks says less.
  SequenceRunner(const LlamaModel& model, ThreadPool& pool, size_t capacity, size_t max_batch_tokens = 512,
                 SequenceKvOptions kv = {});

  // Feeds `tokens` as the next positions (in chunks of at most max_batch_tokens). Returns the
  // logits after the last token ([vocab]), or after every token ([tokens][vocab]) if all_logits.
  // Fails (out_of_memory / out_of_range), with nothing fed, when the KV cache cannot hold them.
  Expected<std::span<const float>> append(std::span<const TokenId> tokens, bool all_logits = false);

  size_t length() const { return length_; }
  size_t capacity() const { return capacity_; }
  // Forgets positions from `length` on (their blocks go back to the pool).
  void truncate(size_t length);
  void reset() { truncate(0); }

  bool paged() const { return manager_ != nullptr; }
  size_t kv_bytes() const;  // what the KV storage allocated
  KvUsage kv_usage() const;

 private:
  const LlamaModel& model_;
  LlamaForward forward_;
  size_t capacity_;
  size_t max_batch_tokens_;
  std::unique_ptr<KvCacheManager> manager_;  // paged layout
  std::unique_ptr<KvStorage> paged_;         // its K/V bytes
  std::unique_ptr<KvStorage> contiguous_;    // contiguous layout
  size_t length_ = 0;
  std::vector<float> logits_;
};

}  // namespace kvs
