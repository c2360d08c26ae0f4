#include "kv/policies/kv_policy.h"

#include <fmt/format.h>

#include "kv/policies/heavy_hitter_policy.h"
#include "kv/policies/sinks_policy.h"
#include "kv/policies/window_policy.h"

namespace kvs {

std::string_view kv_policy_name(KvPolicyKind kind) {
  switch (kind) {
    case KvPolicyKind::kFull: return "full";
    case KvPolicyKind::kWindow: return "window";
    case KvPolicyKind::kSinks: return "sinks";
    case KvPolicyKind::kHeavyHitters: return "h2o";
  }
  return "?";
}

Expected<KvPolicyKind> parse_kv_policy_kind(std::string_view name) {
  for (KvPolicyKind k : {KvPolicyKind::kFull, KvPolicyKind::kWindow, KvPolicyKind::kSinks, KvPolicyKind::kHeavyHitters})
    if (name == kv_policy_name(k)) return k;
  return Status::invalid_argument(fmt::format("unknown KV policy '{}': expected full, window, sinks or h2o", name));
}

Expected<KvScoreScope> parse_kv_score_scope(std::string_view name) {
  if (name == "head") return KvScoreScope::kPerHead;
  if (name == "pooled") return KvScoreScope::kPooled;
  return Status::invalid_argument(fmt::format("unknown heavy-hitter score scope '{}': expected head or pooled", name));
}

KvPolicyParams KvPolicyParams::resolved(size_t block_size) const {
  KvPolicyParams p = *this;
  if (p.sinks == kDefault) p.sinks = kind == KvPolicyKind::kSinks ? 4 : 0;
  if (p.evict_unit == kDefault) p.evict_unit = block_size;
  if (p.recent == kDefault) p.recent = kind == KvPolicyKind::kHeavyHitters ? budget / 2 : 0;
  return p;
}

Status KvPolicyParams::validate(size_t context) const {
  if (!evicts()) return Status::ok();
  const std::string name(kv_policy_name(kind));
  if (budget == 0)
    return Status::invalid_argument(fmt::format("the {} KV policy needs a budget of tokens (--kv-budget)", name));
  if (budget > context) {
    return Status::invalid_argument(fmt::format(
        "a KV budget of {} tokens exceeds the model's context of {}: positions within the cache must stay in it",
        budget, context));
  }
  if (kind == KvPolicyKind::kWindow && sinks != 0)
    return Status::invalid_argument(fmt::format("the window policy keeps no sinks ({} asked): use sinks", sinks));
  if (evict_unit == 0 || evict_unit >= budget || budget - evict_unit <= sinks) {
    return Status::invalid_argument(fmt::format(
        "a KV budget of {} tokens with {} sinks and evictions of {} keeps no recent token: raise the budget", budget,
        sinks, evict_unit));
  }
  return Status::ok();
}

std::string KvPolicyParams::describe() const {
  switch (kind) {
    case KvPolicyKind::kFull: return "full";
    case KvPolicyKind::kWindow: return fmt::format("window (budget {})", budget);
    case KvPolicyKind::kSinks: return fmt::format("sinks (budget {}, {} sinks)", budget, sinks);
    case KvPolicyKind::kHeavyHitters:
      return fmt::format("h2o (budget {}, {} recent, {} sinks, {} per {})", budget, recent, sinks,
                         per_query_scores ? "attention per query" : "attention",
                         scores == KvScoreScope::kPooled ? "sequence" : "layer and KV head");
  }
  return "?";
}

std::unique_ptr<KvEvictionPolicy> make_kv_eviction_policy(const KvPolicyParams& params) {
  switch (params.kind) {
    case KvPolicyKind::kWindow: return std::make_unique<WindowPolicy>(params);
    case KvPolicyKind::kSinks: return std::make_unique<SinksPolicy>(params);
    case KvPolicyKind::kHeavyHitters: return std::make_unique<HeavyHitterPolicy>(params);
    case KvPolicyKind::kFull: break;
  }
  KVS_ASSERT(false, "no eviction policy for the full cache");
  return nullptr;
}

}  // namespace kvs
