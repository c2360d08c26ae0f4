#include "engine/kv_evictor.h"

#include "tensor/ops.h"

namespace kvs {

KvEvictor::KvEvictor(const ModelConfig& config)
    : rotation_{.inv_freq = rope_inverse_frequencies(config.rope_dim, config.rope_freq_base),
                .neox = config.rope_style == RopeStyle::kNeox},
      num_rows_(config.num_layers * config.num_kv_heads) {}

size_t KvEvictor::evict_if_full(Request& r, HybridKvManager& kv, std::span<KvStorage> storages) {
  if (!r.kv_policy || !kv.contains(r.id)) return 0;
  const KvPolicyParams& p = r.kv_policy->params();
  const size_t slots = kv.num_slots(r.id);
  if (slots < p.budget || kv.num_tokens(r.id) >= r.num_tokens()) return 0;  // room left, or nothing to compute
  const KvEvictionPolicy& policy = *r.kv_policy;
  if (policy.per_head()) {
    kept_.resize(num_rows_);
    for (size_t row = 0; row < num_rows_; ++row) policy.select(slots, r.kv_scores->row(row).first(slots), kept_[row]);
  } else {
    kept_.resize(1);
    std::span<const uint64_t> scores;
    if (policy.needs_scores()) {
      r.kv_scores->pooled(slots, pooled_);
      scores = pooled_;
    }
    policy.select(slots, scores, kept_[0]);
  }
  for (size_t g = 0; g < storages.size(); ++g) compact_kv(storages[g], kv.group(g).block_table(r.id), kept_, rotation_);
  if (r.kv_scores) {
    for (size_t row = 0; row < r.kv_scores->num_rows(); ++row)
      r.kv_scores->compact(row, kept_[kept_.size() == 1 ? 0 : row]);
  }
  const size_t evicted = slots - p.keep();
  if (r.params.on_eviction)
    r.params.on_eviction({.num_tokens = kv.num_tokens(r.id), .num_slots = slots, .kept = kept_});
  kv.evict(r.id, evicted);
  return evicted;
}

}  // namespace kvs
