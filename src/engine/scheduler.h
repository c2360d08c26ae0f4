// Iteration-level scheduling (continuous batching with chunked prefill). Each step:
//   1. running requests, oldest admission first, get min(uncomputed, budget) tokens; when the KV
//      pool cannot hold them, the most recently admitted running request is preempted (its blocks
//      freed, its computed count reset; it is recomputed when resumed);
//   2. waiting requests are admitted in arrival order while the token budget, max_seqs and the
//      KV pool allow (a long prompt takes several steps: chunked prefill).
// The result is a plain-data plan; the engine runs it and reports back with `on_computed`.
#pragma once

#include <deque>
#include <vector>

#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace kvs {

struct SchedulerConfig {
  size_t max_batch_tokens = 512;  // tokens per step, all requests together
  size_t max_seqs = 32;           // running requests at once
};

struct ScheduledChunk {
  Request* request = nullptr;
  size_t first = 0;       // == request->num_computed_tokens when scheduled
  size_t num_tokens = 0;  // tokens [first, first + num_tokens) are computed this step
  bool completes() const { return first + num_tokens == request->num_tokens(); }  // logits wanted
};

struct SchedulePlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<Request*> preempted;      // lost their blocks this step; back at the front of waiting
  std::vector<Request*> out_of_memory;  // cannot grow even alone in the pool: to be finished
  size_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {}

  void add(Request* request) { waiting_.push_back(request); }
  SchedulePlan schedule();
  // After the forward pass: the chunk's K/V are written.
  void on_computed(const ScheduledChunk& chunk);
  // Removes a request (finished or aborted) from either queue and frees its blocks at once.
  void remove(Request* request);

  const std::vector<Request*>& running() const { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  size_t num_preemptions() const { return num_preemptions_; }

 private:
  void preempt(Request* victim, SchedulePlan& plan);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::vector<Request*> running_;  // admission order: the back is preempted first
  std::deque<Request*> waiting_;
  size_t num_preemptions_ = 0;
};

}  // namespace kvs
