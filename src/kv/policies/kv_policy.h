// KV eviction policies: when a sequence's cache reaches its budget of tokens, which of its cached
// tokens stay. One interface, one small class per policy (window_policy, sinks_policy,
// heavy_hitter_policy), chosen per request. A policy only decides; the engine compacts the kept K/V
// (attention/compact_kv.h) and the KV manager returns the blocks freed (KvCacheManager::evict).
//
// The rule every policy follows (and the tests' naive reference with it): a sequence holds at most
// `budget` slots; when it holds exactly `budget` and has a token to compute, the policy keeps
// budget - evict_unit of them (so the blocks past them go back at once) and the sequence goes on. Slot i
// holds the i-th oldest kept token, and its RoPE position is i (positions within the cache, as
// StreamingLLM assigns them), so positions stay below the budget however long the sequence runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kvs {

enum class KvPolicyKind {
  kFull,          // no eviction: the cache grows with the sequence, up to the model's context
  kWindow,        // the most recent tokens only
  kSinks,         // StreamingLLM: the first `sinks` tokens (attention sinks) and the most recent
  kHeavyHitters,  // H2O: the most recent `recent`, and the rest of the budget by accumulated attention
};
std::string_view kv_policy_name(KvPolicyKind kind);  // full, window, sinks, h2o
Expected<KvPolicyKind> parse_kv_policy_kind(std::string_view name);

// Heavy hitters rank slots by the attention they received: per layer and KV head, each keeping its own
// set (as H2O does), or pooled over all layers and heads into one set.
enum class KvScoreScope { kPerHead, kPooled };
Expected<KvScoreScope> parse_kv_score_scope(std::string_view name);

struct KvPolicyParams {
  static constexpr size_t kDefault = SIZE_MAX;
  KvPolicyKind kind = KvPolicyKind::kFull;
  size_t budget = 0;                             // slots a sequence holds at most (every kind but full)
  size_t sinks = kDefault;                       // first tokens always kept: sinks 4, h2o 0, window 0 (and only 0)
  size_t recent = kDefault;                      // h2o: the most recent tokens always kept (default: half the budget)
  KvScoreScope scores = KvScoreScope::kPerHead;  // h2o
  // h2o: rank by the attention a token received per query that could see it, not in total (which favours the
  // oldest tokens, those seen by the most queries)
  bool per_query_scores = false;
  size_t evict_unit = kDefault;  // slots freed by one eviction (default: the block size)

  bool evicts() const { return kind != KvPolicyKind::kFull; }
  // The defaults filled in for blocks of `block_size` tokens.
  KvPolicyParams resolved(size_t block_size) const;
  // Slots an eviction keeps: budget - evict_unit.
  size_t keep() const { return budget - evict_unit; }
  // Of resolved params, for a model whose context holds `context` positions.
  Status validate(size_t context) const;
  std::string describe() const;  // e.g. "sinks (budget 256, 4 sinks)"
};

class KvEvictionPolicy {
 public:
  virtual ~KvEvictionPolicy() = default;
  const KvPolicyParams& params() const { return params_; }
  // Each layer and KV head keeps its own set (from its own scores), or every one keeps the same.
  virtual bool per_head() const { return false; }
  // select() reads attention mass per slot (kv/policies/slot_scores.h).
  virtual bool needs_scores() const { return false; }
  // kept = the params().keep() slots of [0, num_slots) that stay, ascending. scores: [num_slots] the row's
  // attention scores (or every row's summed, pooled: SlotScores::scores) when needs_scores(), else empty.
  virtual void select(size_t num_slots, std::span<const double> scores, std::vector<uint32_t>& kept) const = 0;

 protected:
  explicit KvEvictionPolicy(const KvPolicyParams& params) : params_(params) {}
  KvPolicyParams params_;
};

// The policy of resolved, valid params that evict (not full).
std::unique_ptr<KvEvictionPolicy> make_kv_eviction_policy(const KvPolicyParams& params);

}  // namespace kvs
