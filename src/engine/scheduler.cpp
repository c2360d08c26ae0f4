#include "engine/scheduler.h"

#include <algorithm>

namespace kvs {

void Scheduler::preempt(SequenceState* victim, SchedulePlan& plan) {
  const size_t computed = num_computed(*victim);
  // A swap is found again by the victim's prefix lookup: only a sequence that looks its prefix up swaps.
  const bool swapped = victim->use_prefix_cache &&
                       prefer_swap(config_.preempt, costs_, kv_.bytes_held(victim->id), computed) &&
                       kv_.swap_out(victim->id);
  if (!swapped) kv_.free(victim->id);  // its computed count is now 0
  victim->computed_at_preemption = computed;
  num_swapped_ += swapped;
  ++victim->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.push_front(victim);
  plan.preempted.push_back(victim);
  // A victim scheduled earlier in this step loses its chunk too.
  std::erase_if(plan.chunks, [&](const ScheduledChunk& c) { return c.seq == victim; });
}

SchedulePlan Scheduler::schedule() {
  SchedulePlan plan;
  size_t budget = config_.max_batch_tokens;

  // 1. Running requests first, oldest admission first.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    SequenceState* r = running_[i];
    const size_t n = std::min({num_uncomputed(*r), budget, room_in_budget(*r)});
    if (n == 0) {
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!kv_.can_reserve(r->id, n)) {
      if (running_.size() == 1) {
        // Alone in the pool and still cannot grow: it can never finish; the engine ends it.
        plan.out_of_memory.push_back(r);
        running_.erase(running_.begin() + static_cast<long>(i));
        self_preempted = true;
        break;
      }
      SequenceState* victim = running_.back();
      preempt(victim, plan);
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) continue;  // running_[i] is now the next request
    const bool reserved = kv_.reserve(r->id, n);
    KVS_ASSERT(reserved, "reserve of {} tokens failed after can_reserve", n);
    plan.chunks.push_back({r, num_computed(*r), n});
    budget -= n;
    ++i;
  }
  // Recompute the token count: preemption may have removed chunks scheduled above.
  plan.num_tokens = 0;
  for (const auto& c : plan.chunks) plan.num_tokens += c.num_tokens;
  budget = config_.max_batch_tokens - plan.num_tokens;

  // 2. Admit waiting requests, unless this step had to preempt (memory is tight).
  // Seats: a running sequence's, and those of the samples it has still to fork.
  size_t seats = running_.size();
  for (const SequenceState* r : running_) seats += r->num_forks;
  // A sequence whose prefix is being read from disk waits (engine.h: prefix loads); those behind it may go first.
  for (size_t w = 0; plan.preempted.empty() && budget > 0 && w < waiting_.size();) {
    SequenceState* r = waiting_[w];
    if (r->kv_loading) {
      ++w;
      continue;
    }
    if (!running_.empty() && seats + 1 + r->num_forks > config_.max_seqs) break;
    KVS_ASSERT(!kv_.contains(r->id), "waiting sequence {} holds KV blocks", r->id.value);
    const HybridPrefixMatch match =
        r->use_prefix_cache ? kv_.match_prefix(r->tokens, r->prefix_namespace) : kv_.no_match();
    const size_t cached = match.num_tokens;
    const size_t n = std::min({r->num_tokens() - cached, budget, room_in_budget(*r)});
    if (!kv_.begin(r->id, r->tokens, r->prefix_namespace, match, n, r->kv_window, r->kv_budget > 0)) break;
    if (r->num_preemptions == 0) r->num_cached_tokens = cached;
    num_recomputed_tokens_ += r->computed_at_preemption - std::min(r->computed_at_preemption, cached);
    r->computed_at_preemption = 0;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    running_.push_back(r);
    seats += 1 + r->num_forks;
    plan.chunks.push_back({r, num_computed(*r), n});
    plan.num_tokens += n;
    budget -= n;
  }
  return plan;
}

void Scheduler::on_computed(const ScheduledChunk& chunk) {
  const SequenceState& seq = *chunk.seq;
  KVS_ASSERT(num_computed(seq) == chunk.first, "sequence {} computed {} but its chunk starts at {}", seq.id.value,
             num_computed(seq), chunk.first);
  kv_.commit(seq.id, std::span(seq.tokens).subspan(chunk.first, chunk.num_tokens));
}

void Scheduler::requeue_all() {
  for (SequenceState* seq : waiting_) kv_.free(seq->id);
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    SequenceState* seq = *it;
    seq->computed_at_preemption = num_computed(*seq);
    kv_.free(seq->id);
    ++seq->num_preemptions;
    ++num_preemptions_;
    waiting_.push_front(seq);
  }
  running_.clear();
}

void Scheduler::remove(SequenceState* seq) {
  kv_.free(seq->id);
  std::erase(running_, seq);
  std::erase(waiting_, seq);
}

}  // namespace kvs
