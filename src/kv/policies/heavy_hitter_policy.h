// H2O (Zhang et al., 2023): an eviction keeps the first `sinks` slots (0 by default: H2O has none), the
// most recent `recent`, and of the others those that received the most attention since they were
// cached (heavy hitters), up to keep() in all. Ties go to the older slot. Per layer and KV head, each with
// its own scores and its own kept set, as H2O does, or pooled into one set (KvScoreScope).
#pragma once

#include "kv/policies/kv_policy.h"

namespace kvs {

class HeavyHitterPolicy : public KvEvictionPolicy {
 public:
  explicit HeavyHitterPolicy(const KvPolicyParams& params) : KvEvictionPolicy(params) {}
  bool per_head() const override { return params_.scores == KvScoreScope::kPerHead; }
  bool needs_scores() const override { return true; }
  void select(size_t num_slots, std::span<const double> scores, std::vector<uint32_t>& kept) const override;
};

}  // namespace kvs
