#include "engine/capabilities.h"

#include <fmt/format.h>

#include <span>

namespace kvs {
namespace {

using F = Feature;

// Every rule, in the order they are checked. A feature pair appears once.
constexpr FeatureRule kRules[] = {
    {F::kKvMemory, F::kKvBlocks, false, "both size the pool", "give a KV memory budget or a block count, not both"},
    {F::kSwapPreemption, F::kNoHostTier, false, "a swapped-out request's KV is kept in the host tier",
     "give --kv-host"},
    {F::kMlaCache, F::kKvWindow, true,
     "an MLA latent cache holds every position (the expanded attention form reads every cached slot)",
     "run without a window"},
    {F::kMlaCache, F::kEvictionPolicy, true,
     "an MLA latent cache holds every position (the expanded attention form reads every cached slot)",
     "run without an eviction policy"},
    {F::kMlaCache, F::kTensorParallel, true, "tensor parallelism does not split an MLA latent cache yet",
     "run on one rank"},
    {F::kContiguousLayout, F::kKvWindow, false, "a contiguous block is never let go", "use the paged layout"},
    {F::kContiguousLayout, F::kEvictionPolicy, false, "evicted blocks go back to a pool", "use the paged layout"},
    {F::kContiguousLayout, F::kOffloadTiers, false, "tiers hold blocks of the paged pool", "use the paged layout"},
    {F::kEvictionPolicy, F::kModelWindows, false,
     "positions within the cache would differ between window and global layers", "use a model whose layers are global"},
    {F::kEvictionPolicy, F::kKvWindow, false,
     "positions within the cache would differ between window and global layers", "use one or the other"},
    {F::kEvictionPolicy, F::kPerChannelKeys, false,
     "a policy moves keys one at a time, but keys quantized per channel share scales over groups of rows",
     "use --kv-key-scales token"},
    {F::kEvictionPolicy, F::kParallelSamples, false, "the samples would share blocks its compactions rewrite",
     "ask for one sample, or no policy"},
    {F::kEvictionPolicy, F::kNoCacheBaseline, false, "the baseline keeps no KV to evict", "use one or the other"},
    {F::kKvWindow, F::kNoCacheBaseline, false, "the baseline keeps no KV", "use one or the other"},
    {F::kParallelSamples, F::kNoCacheBaseline, false,
     "the samples share their prompt's KV, which the baseline does not keep", "ask for one sample"},
    {F::kParallelSamples, F::kPerTokenLogits, false, "the samples share one prompt computation", "ask for one sample"},
    {F::kParallelSamples, F::kPromptLogprobs, false, "the samples share one prompt computation", "ask for one sample"},
    {F::kOffloadTiers, F::kWindowPools, true, "tiers hold blocks of one pool of global layers",
     "use --no-kv-hybrid, or no tier"},
    {F::kOffloadTiers, F::kKvWindow, true, "tiers hold blocks of one pool of global layers",
     "use no window, or no tier"},
    {F::kOffloadTiers, F::kNoPrefixCache, false, "tiers hold cached prefixes", "turn the prefix cache on"},
    {F::kDiskTier, F::kTensorParallel, true, "each rank's share of a block would need a disk tier of its own",
     "use --kv-host alone"},
};

constexpr std::string_view kNames[] = {
    "an MLA latent KV cache (deepseek2)",
    "a KV window",
    "the model's sliding-window layers",
    "the model's window layers in pools of their own",
    "the contiguous KV layout",
    "a KV eviction policy",
    "keys quantized per channel",
    "parallel samples",
    "the no-cache baseline",
    "per-token logits",
    "prompt logprobs",
    "KV offload tiers",
    "a KV disk tier",
    "the prefix cache off",
    "tensor parallelism",
    "a KV memory budget",
    "a KV block count",
    "swap preemption",
    "no --kv-host",
};
static_assert(std::size(kNames) == static_cast<size_t>(Feature::kCount));

}  // namespace

std::string_view feature_name(Feature feature) { return kNames[static_cast<size_t>(feature)]; }

std::span<const FeatureRule> feature_rules() { return kRules; }

FeatureSet& FeatureSet::add(Feature feature, bool on, std::string words) {
  if (!on) return *this;
  on_[index(feature)] = true;
  words_[index(feature)] = std::move(words);
  return *this;
}

std::string_view FeatureSet::describe(Feature feature) const {
  const std::string& words = words_[index(feature)];
  return words.empty() ? feature_name(feature) : std::string_view(words);
}

Status check_features(const FeatureSet& features) {
  for (const FeatureRule& rule : kRules) {
    if (!features.has(rule.a) || !features.has(rule.b)) continue;
    std::string message =
        fmt::format("{} and {} do not combine{}: {}; {}", features.describe(rule.a), features.describe(rule.b),
                    rule.unimplemented ? " (not supported yet)" : "", rule.why, rule.instead);
    return rule.unimplemented ? Status::unimplemented(std::move(message))
                              : Status::invalid_argument(std::move(message));
  }
  return Status::ok();
}

}  // namespace kvs
