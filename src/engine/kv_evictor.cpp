#include "engine/kv_evictor.h"

#include "engine/tensor_parallel.h"
#include "tensor/ops.h"

namespace kvs {

KeyRotation model_key_rotation(const ModelConfig& c) {
  return {.inv_freq = c.rope_frequencies(), .neox = c.rope_style == RopeStyle::kNeox};
}

std::vector<std::vector<uint32_t>> kept_rows_of_heads(std::span<const std::vector<uint32_t>> kept, size_t num_layers,
                                                      size_t model_kv_heads, size_t first, size_t count) {
  if (kept.size() == 1) return {kept[0]};
  KVS_ASSERT(kept.size() == num_layers * model_kv_heads, "{} kept rows for {} layers x {} KV heads", kept.size(),
             num_layers, model_kv_heads);
  std::vector<std::vector<uint32_t>> rows;
  rows.reserve(num_layers * count);
  for (size_t layer = 0; layer < num_layers; ++layer)
    for (size_t h = first; h < first + count; ++h) rows.push_back(kept[layer * model_kv_heads + h]);
  return rows;
}

KvEvictor::KvEvictor(const Model& model)
    : rotation_(model_key_rotation(model.config())),
      num_layers_(model.config().num_layers),
      model_kv_heads_(model.config().num_kv_heads),
      first_kv_head_(model.first_kv_head()),
      kv_heads_(model.kv_spec({}, 1).num_kv_heads),
      num_rows_(num_layers_ * model_kv_heads_) {}

size_t KvEvictor::evict_if_full(Request& r, HybridKvManager& kv, std::span<KvStorage> storages,
                                TensorParallelDriver* tp) {
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
  // Per-head sets: this rank's storage holds its own KV heads' rows (the other ranks pick theirs from all of them).
  const bool mine_only = sets > 1 && kv_heads_ != model_kv_heads_;
  const auto own = mine_only ? kept_rows_of_heads(kept_, num_layers_, model_kv_heads_, first_kv_head_, kv_heads_)
                             : std::vector<std::vector<uint32_t>>();
  for (size_t g = 0; g < storages.size(); ++g) {
    compact_kv(storages[g], kv.group(g).block_table(r.id), mine_only ? std::span(own) : std::span(kept_), rotation_);
    if (tp) tp->compact(g, kv.group(g).block_table(r.id), kept_);
  }
  if (r.kv_scores) r.kv_scores->compact(kept_);
  const size_t evicted = slots - p.keep();
  if (r.params.on_eviction) r.params.on_eviction({.num_tokens = computed, .num_slots = slots, .kept = kept_});
  kv.evict(r.id, evicted);
  return evicted;
}

}  // namespace kvs
