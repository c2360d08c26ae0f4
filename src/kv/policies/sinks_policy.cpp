#include "kv/policies/sinks_policy.h"

#include <algorithm>
#include <numeric>

namespace kvs {

void SinksPolicy::select(size_t num_slots, std::span<const double>, std::vector<uint32_t>& kept) const {
  const size_t keep = std::min(params_.keep(), num_slots), sinks = std::min(params_.sinks, keep);
  kept.resize(keep);
  std::iota(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(sinks), 0u);
  std::iota(kept.begin() + static_cast<std::ptrdiff_t>(sinks), kept.end(),
            static_cast<uint32_t>(num_slots - (keep - sinks)));
}

}  // namespace kvs
