#include "cli/kv_dtype_option.h"

#include <fmt/format.h>

namespace kvs::cli {
namespace {

KvDType parse_type(const std::string& flag, const std::string& name) {
  const auto dtype = kv_dtype_from_name(name);
  if (!dtype) throw CommandError(fmt::format("unknown {} '{}' (f32, f16, bf16, int8, int4)", flag, name));
  return *dtype;
}

}  // namespace

void add_kv_precision_options(CLI::App& command, KvPrecisionOptions& options) {
  command
      .add_option("--kv-dtype", options.both,
                  "KV cache element type of K and V: f32, f16, bf16, int8 or int4 (16-bit types halve the cache, "
                  "int8 and int4 store integers with a scale and min per group)")
      ->capture_default_str();
  command.add_option("--kv-dtype-k", options.k, "Element type of the keys alone (default: --kv-dtype)");
  command.add_option("--kv-dtype-v", options.v, "Element type of the values alone (default: --kv-dtype)");
  command.add_option(
      "--kv-key-scales", options.key_scales,
      "Grouping of int8/int4 keys: channel (a scale and min per channel for each 16 tokens: KIVI's "
      "grouping for outlier channels; a filling group waits in 16 bits until it is complete) or token (per 32 "
      "elements of a row, as values; nothing depends on how prompts are chunked). Default: channel, or token "
      "under an eviction policy (which moves keys one at a time)");
  command.add_flag("--kv-rotate-keys", options.rotate_keys,
                   "Store keys Hadamard-rotated (queries are rotated alike): spreads outlier channels before "
                   "quantization; needs a power-of-two head dim");
  command.add_option("--kv-window", options.window,
                     "Sliding window: every layer attends to at most its last W tokens, and KV blocks before the "
                     "window are freed (memory O(W) however long the sequence; an accuracy cost on models trained "
                     "with full attention). Default: the model's own windows (Gemma 3, Mistral v0.1)");
  command.add_flag("--no-kv-hybrid", options.no_hybrid,
                   "One KV pool for every layer: window layers then keep the whole context, as global layers "
                   "do (the baseline of the hybrid layout, which gives each window its own pool)");
  command
      .add_option("--kv-policy", options.policy,
                  "KV eviction when a sequence's cache reaches --kv-budget tokens: full (none: the cache grows to the "
                  "context), window (the most recent tokens), sinks (StreamingLLM: the first --kv-sinks tokens and "
                  "the most recent) or h2o (heavy hitters: the --kv-recent most recent and the tokens that received "
                  "the most attention). Positions are assigned within the cache, so a sequence can run past the "
                  "model's context with bounded memory")
      ->capture_default_str();
  command.add_option("--kv-budget", options.budget, "Tokens a sequence's KV cache holds at most under --kv-policy");
  command.add_option("--kv-sinks", options.sinks, "First tokens always kept (default: 4 for sinks, 0 for h2o)");
  command.add_option("--kv-recent", options.recent,
                     "h2o: the most recent tokens always kept (default: half the budget)");
  command
      .add_option("--kv-scores", options.scores,
                  "h2o: rank tokens per layer and KV head, each keeping its own set (head, as H2O does), or by their "
                  "attention summed over all layers and heads (pooled)")
      ->capture_default_str();
  command.add_flag("--kv-score-per-query", options.per_query_scores,
                   "h2o: rank tokens by the attention they received per query that could see them, not in total "
                   "(the total favours the oldest tokens)");
  command.add_option("--kv-evict-unit", options.evict_unit,
                     "Tokens one eviction removes, so that whole blocks go back (default: the block size)");
  command
      .add_option("--mla-form", options.mla_form,
                  "MLA models (deepseek2): attend over the cached latents with the K/V up-projections absorbed "
                  "(absorbed), over per-head K/V expanded from them (expanded), or per sequence by the tokens it "
                  "brings to a step (auto: expanded from " +
                      std::to_string(kMlaExpandFromTokens) + ")")
      ->check(CLI::IsMember({"auto", "absorbed", "expanded"}))
      ->capture_default_str();
}

KvOptions parse_kv_precision(const KvPrecisionOptions& options, KvOptions p) {
  const KvDType both = parse_type("--kv-dtype", options.both);
  p.dtype = {options.k.empty() ? both : parse_type("--kv-dtype-k", options.k),
             options.v.empty() ? both : parse_type("--kv-dtype-v", options.v)};
  p.rotate_keys = options.rotate_keys;
  p.window = options.window;
  p.hybrid = !options.no_hybrid;
  const auto kind = parse_kv_policy_kind(options.policy);
  if (!kind) throw CommandError(fmt::format("--kv-policy: {}", kind.status().message()));
  const auto scores = parse_kv_score_scope(options.scores);
  if (!scores) throw CommandError(fmt::format("--kv-scores: {}", scores.status().message()));
  p.policy = {.kind = *kind,
              .budget = options.budget,
              .sinks = options.sinks,
              .recent = options.recent,
              .scores = *scores,
              .per_query_scores = options.per_query_scores,
              .evict_unit = options.evict_unit};
  if (p.policy.evicts() && options.budget == 0)
    throw CommandError(fmt::format("--kv-policy {} needs --kv-budget (tokens held per sequence)", options.policy));
  if (!p.policy.evicts() && options.budget > 0)
    throw CommandError(
        fmt::format("--kv-budget {} needs an evicting --kv-policy (window, sinks, h2o)", options.budget));
  const std::string key_scales = !options.key_scales.empty() ? options.key_scales
                                 : p.policy.evicts()         ? "token"
                                                             : "channel";
  const auto axis = kv_scale_axis_from_name(key_scales);
  if (!axis) throw CommandError(fmt::format("unknown --kv-key-scales '{}' (channel, token)", key_scales));
  p.key_scales = *axis;
  return p;
}

MlaForm parse_mla_form(const KvPrecisionOptions& options) {
  return *mla_form_from_name(options.mla_form);  // CLI11 checked the name
}

}  // namespace kvs::cli
