// Which features combine: every rule "feature A cannot be combined with feature B" in one table, asked by the
// engine (its configuration at creation, each request as it is added), `kvserve calc`, the CLI and the server. A
// refusal names both features, with the values that make them (a window's tokens, a sample count), and what to do
// instead. Whoever asks describes what it has on as a FeatureSet; check_features() finds the first rule it breaks.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kvs {

enum class Feature : uint8_t {
  kMlaCache,          // an MLA latent KV cache (deepseek2)
  kKvWindow,          // a KV window on every layer (--kv-window) or a request's own (kv_window)
  kModelWindows,      // the model's sliding-window layers
  kWindowPools,       // the model's window layers in pools of their own (paged, hybrid: the default)
  kContiguousLayout,  // one block of the whole context per sequence (the reference layout)
  kEvictionPolicy,    // --kv-policy window|sinks|h2o: a budget of tokens per sequence
  kPerChannelKeys,    // quantized keys grouped per channel (--kv-key-scales channel, the default)
  kParallelSamples,   // n > 1 samples of one prompt
  kNoCacheBaseline,   // --no-kv-cache: every step recomputes the whole history
  kPerTokenLogits,    // logits after every token (perplexity, on_logits)
  kPromptLogprobs,    // logprobs of the prompt's tokens (echo)
  kOffloadTiers,      // --kv-host / --kv-disk
  kDiskTier,          // --kv-disk
  kNoPrefixCache,     // --no-prefix-cache
  kTensorParallel,    // --tp N > 1
  kKvMemory,          // --kv-memory
  kKvBlocks,          // --kv-blocks
  kSwapPreemption,    // --kv-preempt swap
  kNoHostTier,        // no --kv-host
  kCount
};

// The features something has on, each with the words that describe it in a refusal.
class FeatureSet {
 public:
  // Turns `feature` on when `on`, described as `words` (its default name when empty).
  FeatureSet& add(Feature feature, bool on = true, std::string words = {});
  bool has(Feature feature) const { return on_[index(feature)]; }
  // "a KV window (8 tokens)", or the feature's default name.
  std::string_view describe(Feature feature) const;

 private:
  static size_t index(Feature f) { return static_cast<size_t>(f); }
  std::array<bool, static_cast<size_t>(Feature::kCount)> on_ = {};
  std::array<std::string, static_cast<size_t>(Feature::kCount)> words_ = {};
};

// The first rule `features` breaks, as an error naming both features and what to do instead (invalid_argument,
// or unimplemented for a combination that could work but is not built); ok when none is broken.
Status check_features(const FeatureSet& features);

// The rules, for documentation and tests: each pair that does not combine, why, and what to do instead.
struct FeatureRule {
  Feature a, b;
  bool unimplemented;        // could work, not built yet (else: cannot, by what the features are)
  std::string_view why;      // why they do not combine
  std::string_view instead;  // what to do instead
};
std::span<const FeatureRule> feature_rules();
std::string_view feature_name(Feature feature);

}  // namespace kvs
