// Iteration-level scheduling (continuous batching with chunked prefill). Each step:
//   1. running sequences, oldest admission first, get min(uncomputed, budget) tokens; when the KV
//      pool cannot hold them, the most recently admitted running sequence is preempted: its blocks are
//      freed (its computed count is 0), after a swap to the host tier where SchedulerConfig::preempt
//      chooses it (engine/preemption.h); when it resumes, its prefix match finds what was kept and the
//      rest is recomputed;
//   2. waiting sequences are admitted in arrival order while the token budget, max_seqs (counting
//      the samples a sequence will fork, unless it would run alone) and the KV pool allow (a long prompt takes several
//      steps: chunked prefill). A waiting sequence holds no blocks; it begins from the longest cached prefix of its
//      tokens (prompt, and after a preemption what it generated) and computes only the rest. Cached idle blocks count
//      as free. A sequence whose prefix blocks are on their way from disk (kv_loading) is passed over until they
//      arrive.
// A sequence under an eviction policy (kv_budget > 0) gets at most the slots left in its budget; the
// engine evicts before scheduling when none are left.
// A sequence's computed count is the KV manager's (tokens committed to its block table), never a
// second counter here. The result is a plain-data plan; the engine runs it and reports back with
// `on_computed`. Sees only SequenceState and KV accounting: testable with toy sequences.
#pragma once

#include <deque>
#include <vector>

#include "engine/preemption.h"
#include "engine/request.h"
#include "kv/hybrid_kv_manager.h"

namespace kvs {

struct SchedulerConfig {
  size_t max_batch_tokens = 512;                 // tokens per step, all sequences together
  size_t max_seqs = 32;                          // running sequences at once
  KvPreemptMode preempt = KvPreemptMode::kAuto;  // swap or recompute a victim (swap needs offload tiers)
};

struct ScheduledChunk {
  SequenceState* seq = nullptr;
  size_t first = 0;       // the sequence's computed count when scheduled
  size_t num_tokens = 0;  // tokens [first, first + num_tokens) are computed this step
  bool completes() const { return first + num_tokens == seq->num_tokens(); }  // logits wanted
};

struct SchedulePlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<SequenceState*> preempted;      // lost their blocks this step; back at the front of waiting
  std::vector<SequenceState*> out_of_memory;  // cannot grow even alone in the pool: to be finished
  size_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, HybridKvManager& kv) : config_(config), kv_(kv) {}

  void add(SequenceState* seq) { waiting_.push_back(seq); }
  // Adds a sequence that already holds blocks (a sample forked from a running one) to the running set.
  void add_running(SequenceState* seq) { running_.push_back(seq); }
  SchedulePlan schedule();
  // After the forward pass: the chunk's K/V are written (its tokens are committed to the KV manager).
  void on_computed(const ScheduledChunk& chunk);
  // Removes a sequence (finished or aborted) from either queue and frees its blocks at once.
  void remove(SequenceState* seq);
  // Frees a running sequence's blocks so that its next chunk recomputes it from the start (the
  // no-cache baseline); it stays running.
  void forget_computed(SequenceState* seq) { kv_.free(seq->id); }
  // After the engine lost the KV cache's content: every running sequence goes back to the front of the waiting
  // queue, in order, its blocks freed, to compute again from its tokens (a preemption by recompute each), and the
  // waiting ones let go of what a swap kept of them.
  void requeue_all();

  size_t num_computed(const SequenceState& seq) const { return kv_.num_tokens(seq.id); }
  const std::vector<SequenceState*>& running() const { return running_; }
  const std::deque<SequenceState*>& waiting() const { return waiting_; }
  size_t num_preemptions() const { return num_preemptions_; }
  size_t num_swapped() const { return num_swapped_; }  // of the preemptions, those swapped to the host tier
  // Tokens resumed sequences computed again: what they had computed when preempted and their match lacked.
  uint64_t num_recomputed_tokens() const { return num_recomputed_tokens_; }
  // The measured rates KvPreemptMode::kAuto chooses by (the engine observes into them).
  PreemptionCosts& preemption_costs() { return costs_; }
  const PreemptionCosts& preemption_costs() const { return costs_; }

 private:
  void preempt(SequenceState* victim, SchedulePlan& plan);
  size_t num_uncomputed(const SequenceState& seq) const { return seq.num_tokens() - num_computed(seq); }
  // Slots a sequence under an eviction policy may still fill (the engine evicts when none are left).
  size_t room_in_budget(const SequenceState& seq) const {
    return seq.kv_budget == 0 ? SIZE_MAX : seq.kv_budget - kv_.num_slots(seq.id);
  }

  SchedulerConfig config_;
  HybridKvManager& kv_;
  std::vector<SequenceState*> running_;  // admission order: the back is preempted first
  std::deque<SequenceState*> waiting_;
  size_t num_preemptions_ = 0;
  size_t num_swapped_ = 0;
  uint64_t num_recomputed_tokens_ = 0;
  PreemptionCosts costs_;
};

}  // namespace kvs
