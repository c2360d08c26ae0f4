// The plain window: an eviction keeps the most recent keep() slots. The baseline StreamingLLM shows
// collapsing once the first tokens leave the cache.
#pragma once

#include "kv/policies/kv_policy.h"

namespace kvs {

class WindowPolicy : public KvEvictionPolicy {
 public:
  explicit WindowPolicy(const KvPolicyParams& params) : KvEvictionPolicy(params) {}
  void select(size_t num_slots, std::span<const double> scores, std::vector<uint32_t>& kept) const override;
};

}  // namespace kvs
