// The serving engine: many requests share one model and one paged KV pool. add_request queues a
// request; each step() schedules (continuous batching, chunked prefill, preemption), runs one
// forward pass over every scheduled token, samples, detokenizes, checks stops, and reports
// outputs through each request's sink. Single-threaded: EngineLoop drives it from one thread.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"
#include "model/llama_forward.h"
#include "model/llama_model.h"

namespace kvs {

struct EngineConfig {
  size_t max_batch_tokens = 512;     // --max-batch-tokens
  size_t max_seqs = 32;              // --max-seqs
  size_t block_size = 16;            // --block-size
  size_t kv_memory_bytes = 0;        // --kv-memory; 0 = room for max_seqs full contexts or 1 GiB, whichever is less
  size_t kv_blocks = 0;              // --kv-blocks (instead of kv_memory_bytes)
  KvDType kv_dtype = KvDType::kF32;  // --kv-dtype: f32, f16 or bf16 K/V elements

  Status validate() const;
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> create(const LlamaModel& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                                  const EngineConfig& config);

  // Validates and queues. Fails (invalid_argument / out_of_range / out_of_memory) when the request
  // can never run: empty prompt, prompt longer than the context, prompt larger than the whole pool.
  Expected<SeqId> add_request(RequestParams params, OutputSink sink);
  // Ends a request now (client gone): its blocks are freed, a final output with kAborted follows.
  void abort(SeqId id);
  void abort_all();
  // One scheduling iteration; returns false when there was nothing to do.
  bool step();
  bool has_work() const { return !requests_.empty(); }

  EngineMetrics metrics() const;
  const KvCacheManager& kv() const { return *kv_; }
  const KvStorage& kv_storage() const { return storage_; }
  const ModelConfig& model_config() const { return model_.config(); }

 private:
  Engine(const LlamaModel& model, const Tokenizer& tokenizer, ThreadPool& pool, const EngineConfig& config,
         std::unique_ptr<KvCacheManager> kv);
  // Samples after a chunk that reached the end of its request's tokens; true when it finished.
  bool advance(Request& r, std::span<const float> logits, std::vector<RequestOutput>& outputs);
  void finish(Request& r, FinishReason reason, RequestOutput& out);
  // Every sequence the scheduler holds is one of this engine's requests.
  static Request& as_request(SequenceState* seq) { return *static_cast<Request*>(seq); }

  const LlamaModel& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  std::unique_ptr<KvCacheManager> kv_;  // block accounting
  KvStorage storage_;                   // the K/V bytes its blocks index
  Scheduler scheduler_;
  LlamaForward forward_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;
  uint64_t next_id_ = 1;
  MetricsRecorder recorder_;
  // Batch buffers, reused across steps.
  std::vector<TokenId> tokens_;
  std::vector<uint32_t> positions_, sequence_of_token_, visible_slots_, logits_for_;
  std::vector<KvSlot> slots_;
  std::vector<SequenceAttention> sequences_;
  std::vector<float> logits_;
};

}  // namespace kvs
