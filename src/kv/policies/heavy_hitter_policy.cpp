#include "kv/policies/heavy_hitter_policy.h"

#include <algorithm>
#include <numeric>

#include "core/status.h"

namespace kvs {

void HeavyHitterPolicy::select(size_t num_slots, std::span<const double> scores, std::vector<uint32_t>& kept) const {
  KVS_ASSERT(scores.size() >= num_slots, "heavy hitters of {} slots with {} scores", num_slots, scores.size());
  const size_t keep = std::min(params_.keep(), num_slots), sinks = std::min(params_.sinks, keep);
  const size_t recent = std::min(params_.recent, keep - sinks), heavy = keep - sinks - recent;
  // Candidates: the slots between the sinks and the recent ones; the `heavy` highest scores stay.
  kept.resize(num_slots - recent - sinks);
  std::iota(kept.begin(), kept.end(), static_cast<uint32_t>(sinks));
  std::partial_sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(heavy), kept.end(),
                    [&](uint32_t a, uint32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a < b; });
  kept.resize(heavy);
  for (size_t s = 0; s < sinks; ++s) kept.push_back(static_cast<uint32_t>(s));
  for (size_t s = num_slots - recent; s < num_slots; ++s) kept.push_back(static_cast<uint32_t>(s));
  std::sort(kept.begin(), kept.end());
}

}  // namespace kvs
