// The KV cache's precision flags, shared by every command that runs the model (run, serve,
// perplexity, bench) and by calc: --kv-dtype sets K and V, --kv-dtype-k / --kv-dtype-v set one of
// them; --kv-key-scales and --kv-rotate-keys choose how quantized keys are grouped and whether they
// are stored Hadamard-rotated; --kv-window narrows every layer's attention to a sliding window and
// --no-kv-hybrid keeps every layer in one pool; --kv-policy and --kv-budget (with --kv-sinks, --kv-recent,
// --kv-scores, --kv-evict-unit) bound each sequence's cache by an eviction policy.
#pragma once

#include <string>

#include "cli/commands.h"
#include "core/kv_dtype.h"
#include "engine/engine.h"

namespace kvs::cli {

struct KvPrecisionOptions {
  std::string both = "f32";                      // --kv-dtype (each command sets its default)
  std::string k = {};                            // --kv-dtype-k: "" = as --kv-dtype
  std::string v = {};                            // --kv-dtype-v: "" = as --kv-dtype
  std::string key_scales = {};                   // --kv-key-scales: "" = channel, or token under an eviction policy
  bool rotate_keys = false;                      // --kv-rotate-keys
  size_t window = 0;                             // --kv-window
  bool no_hybrid = false;                        // --no-kv-hybrid
  std::string policy = "full";                   // --kv-policy
  size_t budget = 0;                             // --kv-budget
  size_t sinks = KvPolicyParams::kDefault;       // --kv-sinks
  size_t recent = KvPolicyParams::kDefault;      // --kv-recent
  std::string scores = "head";                   // --kv-scores
  bool per_query_scores = false;                 // --kv-score-per-query
  size_t evict_unit = KvPolicyParams::kDefault;  // --kv-evict-unit
  std::string mla_form = "auto";                 // --mla-form
};

void add_kv_precision_options(CLI::App& command, KvPrecisionOptions& options);
// `kv` with what these flags set (element types, key scales and rotation, window, pools, policy); its pool's size,
// block and tiers as they were. Throws CommandError naming the flag and the value when one is unknown.
KvOptions parse_kv_precision(const KvPrecisionOptions& options, KvOptions kv = {});
MlaForm parse_mla_form(const KvPrecisionOptions& options);

}  // namespace kvs::cli
