#include "engine/kv_evictor.h"

namespace kvs {

KeyRotation model_key_rotation(const ModelConfig& c) {
  return {.inv_freq = c.rope_frequencies(), .neox = c.rope_style == RopeStyle::kNeox};
}

KvHeadShare model_kv_head_share(const Model& model) {
  return {.num_layers = model.config().num_layers,
          .model_kv_heads = model.config().num_kv_heads,
          .first = model.first_kv_head(),
          .count = model.kv_spec({}, 1).num_kv_heads};
}

KvEvictor::KvEvictor(const Model& model) : num_rows_(model.config().num_layers * model.config().num_kv_heads) {}

size_t KvEvictor::evict_if_full(Request& r, HybridKvManager& kv, std::vector<KvOp>& ops) {
  if (!r.kv_policy || !kv.contains(r.id)) return 0;
  const KvPolicyParams& p = r.kv_policy->params();
  const size_t slots = kv.num_slots(r.id), computed = kv.num_tokens(r.id);
  if (slots < p.budget || computed >= r.num_tokens()) return 0;  // room left, or nothing to compute
  const KvEvictionPolicy& policy = *r.kv_policy;
  if (r.kv_scores) r.kv_scores->stamp(slots, kv.num_evicted(r.id));
  const size_t sets = policy.per_head() ? num_rows_ : 1;
  kept_.resize(sets);
  for (size_t row = 0; row < sets; ++row) {
    if (policy.needs_scores()) r.kv_scores->scores(row, sets == 1, slots, computed, p.per_query_scores, scores_);
    policy.select(slots, policy.needs_scores() ? std::span<const double>(scores_) : std::span<const double>(),
                  kept_[row]);
  }
  for (size_t g = 0; g < kv.num_groups(); ++g) {
    const std::span<const BlockId> blocks = kv.group(g).block_table(r.id);
    ops.push_back(
        KvCompact{.group = static_cast<uint32_t>(g), .blocks = {blocks.begin(), blocks.end()}, .kept = kept_});
  }
  if (r.kv_scores) r.kv_scores->compact(kept_);
  const size_t evicted = slots - p.keep();
  if (r.params.on_eviction) r.params.on_eviction({.num_tokens = computed, .num_slots = slots, .kept = kept_});
  kv.evict(r.id, evicted);
  return evicted;
}

}  // namespace kvs
