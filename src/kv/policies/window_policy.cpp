#include "kv/policies/window_policy.h"

#include <numeric>

namespace kvs {

void WindowPolicy::select(size_t num_slots, std::span<const double>, std::vector<uint32_t>& kept) const {
  const size_t keep = std::min(params_.keep(), num_slots);
  kept.resize(keep);
  std::iota(kept.begin(), kept.end(), static_cast<uint32_t>(num_slots - keep));
}

}  // namespace kvs
