// StreamingLLM (Xiao et al., 2023): an eviction keeps the first `sinks` slots, the attention sinks that
// every query leans on, and the most recent keep() - sinks. As the oldest kept tokens never leave,
// slots 0..sinks-1 are never moved.
#pragma once

#include "kv/policies/kv_policy.h"

namespace kvs {

class SinksPolicy : public KvEvictionPolicy {
 public:
  explicit SinksPolicy(const KvPolicyParams& params) : KvEvictionPolicy(params) {}
  void select(size_t num_slots, std::span<const double> scores, std::vector<uint32_t>& kept) const override;
};

}  // namespace kvs
