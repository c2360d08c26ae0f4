// kvserve calc: how much KV memory a model needs, from the same layer groups and sizing functions the engine
// allocates with (kv/kv_pool_layout.h).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/kv_dtype_option.h"
#include "core/byte_size.h"
#include "engine/capabilities.h"
#include "gguf/gguf.h"
#include "kv/kv_layer_groups.h"
#include "kv/kv_pool_layout.h"
#include "kv/kv_presets.h"
#include "kv/kv_sizing.h"
#include "kv/tiers/kv_tier_stack.h"
#include "model/model_config.h"
#include "model/model_kv_spec.h"
#include "model/tensor_shard.h"

namespace kvs::cli {
namespace {

struct CalcOptions {
  std::string model_path;
  std::string preset;
  size_t layers = 0, kv_heads = 0, head_dim = 0;
  size_t tokens = 0;  // 0: the model's context length
  size_t seqs = 1;
  KvPrecisionOptions kv{.both = "f16"};
  size_t block_size = 16;
  std::string budget;
  std::string host_tier;  // --kv-host
  std::string disk_tier;  // --kv-disk-size
  size_t tp = 1;          // --tp: figures per rank of a model split over N ranks
  bool json = false;
};

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(1ull << 30)); }

struct Shape {
  KvCacheSpec spec;
  size_t context = 0;
  std::vector<uint32_t> layer_windows = {};  // empty: every layer global
};

// The model shape from exactly one of: -m, --preset, explicit dimensions.
Shape resolve_shape(const CalcOptions& o, std::string& label) {
  const int sources = !o.model_path.empty() + !o.preset.empty() + (o.layers || o.kv_heads || o.head_dim);
  if (sources != 1) {
    throw CommandError("give exactly one of -m MODEL.gguf, --preset NAME, or --layers/--kv-heads/--head-dim");
  }
  if (!o.model_path.empty()) {
    auto file = gguf::File::open(o.model_path);
    if (!file) throw CommandError(file.status().message());
    auto config = ModelConfig::from_gguf(*file);
    if (!config) throw CommandError(config.status().message());
    label = o.model_path;
    return {model_kv_spec(*config, {}, 0), config->context_length, config->layer_windows};
  }
  if (!o.preset.empty()) {
    std::string names;
    for (const auto& p : kv_model_presets()) {
      if (p.name == o.preset) {
        label = o.preset;
        const size_t pattern = p.window_pattern ? p.window_pattern : p.spec.num_layers + 1;  // 0: all windowed
        return {p.spec, p.context_length,
                p.sliding_window ? interleaved_windows(p.spec.num_layers, p.sliding_window, pattern)
                                 : std::vector<uint32_t>{}};
      }
      names += (names.empty() ? "" : ", ") + std::string(p.name);
    }
    throw CommandError(fmt::format("unknown preset '{}' (known: {})", o.preset, names));
  }
  if (!o.layers || !o.kv_heads || !o.head_dim) {
    throw CommandError(fmt::format("--layers ({}), --kv-heads ({}) and --head-dim ({}) must all be positive", o.layers,
                                   o.kv_heads, o.head_dim));
  }
  label = "custom";
  return {KvCacheSpec{.num_layers = o.layers, .num_kv_heads = o.kv_heads, .head_dim = o.head_dim}, 0};
}

// What one sequence of `tokens` holds per KV layer group (the engine's layout, kv_layer_groups.h).
struct GroupFigures {
  KvCacheSpec spec;  // the group's layers
  size_t window = 0;
  size_t bytes_per_seq = 0;
  size_t blocks_per_seq = 0;
};

void run(const CalcOptions& o) {
  std::string label;
  Shape shape = resolve_shape(o, label);
  KvCacheSpec& spec = shape.spec;
  const size_t context = shape.context;
  const KvPrecision kv = parse_kv_precision(o.kv);
  spec.dtype = kv.dtype;
  spec.key_scale_axis = kv.key_scale_axis;
  spec.rotate_keys = kv.rotate_keys;
  spec.block_size = o.block_size;
  // Tensor parallelism: every figure below is one rank's, which holds its share of the KV heads (model/tensor_shard.h).
  const size_t all_kv_heads = spec.num_kv_heads;
  // Features that do not combine are refused as the engine refuses them (engine/capabilities.h).
  const KvPolicyParams policy = kv.policy.resolved(spec.block_size);
  const bool model_windows = std::ranges::any_of(shape.layer_windows, [](uint32_t w) { return w > 0; });
  FeatureSet features;
  features.add(Feature::kMlaCache, spec.mla)
      .add(Feature::kTensorParallel, o.tp > 1, fmt::format("tensor parallelism (--tp {})", o.tp))
      .add(Feature::kKvWindow, kv.window > 0, fmt::format("a KV window ({} tokens)", kv.window))
      .add(Feature::kModelWindows, model_windows)
      .add(Feature::kWindowPools, model_windows && kv.hybrid)
      .add(Feature::kEvictionPolicy, policy.evicts(), fmt::format("the KV policy {}", policy.describe()))
      .add(Feature::kOffloadTiers, !o.host_tier.empty() || !o.disk_tier.empty());
  if (Status s = check_features(features); !s) throw CommandError(s.message());
  if (o.tp > 1) {
    auto per_rank = kv_heads_per_rank(spec.num_kv_heads, o.tp);
    if (!per_rank) throw CommandError(per_rank.status().message());
    spec.num_kv_heads = *per_rank;
  }
  if (Status s = spec.validate(); !s) throw CommandError(s.message());
  const size_t length = o.tokens ? o.tokens : context;
  if (length == 0) throw CommandError("--tokens is required when the shape has no context length");
  // Under an eviction policy a sequence of any length holds at most its budget (blocks of whole budget slots).
  const size_t tokens = policy.evicts() ? std::min(length, policy.budget) : length;
  std::optional<size_t> budget;
  if (!o.budget.empty()) {
    auto b = parse_byte_size(o.budget);
    if (!b) throw CommandError("--budget: " + b.status().message());
    budget = *b;
  }
  // Offload tiers: what they hold in blocks of this format (the engine sizes them with the same function).
  std::optional<KvTierCapacity> tiers;
  if (!o.host_tier.empty() || !o.disk_tier.empty()) {
    const auto size = [](const char* flag, const std::string& text) -> size_t {
      if (text.empty()) return 0;
      auto b = parse_byte_size(text);
      if (!b) throw CommandError(fmt::format("{} {}: {}", flag, text, b.status().message()));
      return *b;
    };
    tiers = kv_tier_capacity(tier_format(spec), spec.block_size, size("--kv-host", o.host_tier),
                             size("--kv-disk-size", o.disk_tier));
  }
  const KvBlockBytes block = kv_bytes_per_block(spec);
  const size_t blocks_per_seq = kv_blocks_for_tokens(tokens, spec.block_size);
  const size_t per_seq = kv_bytes_for_sequences(spec, tokens, 1);
  const double per_token = kv_bytes_per_token(spec);
  const double per_layer_token = per_token / static_cast<double>(spec.num_layers);
  const size_t tails_per_seq = kv_key_tails_for_sequences(spec, 1), tail_bytes = kv_key_tail_bytes(spec);
  // Sliding windows: each group's layers hold what their window reads (the engine's hybrid layout).
  const KvPoolGroups pools = kv_pool_groups({.spec = spec, .layer_windows = shape.layer_windows}, kv.window, kv.hybrid);
  std::vector<GroupFigures> groups;
  size_t hybrid_per_seq = 0;
  for (size_t g = 0; g < pools.specs.size(); ++g) {
    const size_t window = pools.layers.groups[g].window;
    const size_t bytes = kv_bytes_for_sequences(pools.specs[g], tokens, 1, window);
    groups.push_back({.spec = pools.specs[g],
                      .window = window,
                      .bytes_per_seq = bytes,
                      .blocks_per_seq = kv_blocks_held(tokens, spec.block_size, window)});
    hybrid_per_seq += bytes;
  }
  const bool windowed = groups.size() > 1 || groups[0].window > 0;
  // With windows, a sequence holds its groups' bytes; the plain figures are every layer holding every token.
  const size_t seq_bytes = windowed ? hybrid_per_seq : per_seq, all_seqs = seq_bytes * o.seqs;
  const auto seqs_in = [&](size_t b) { return windowed ? b / seq_bytes : kv_max_seqs_in_budget(spec, tokens, b); };
  if (o.json) {
    nlohmann::json j = {{"model", label},
                        {"kv_dtype", kv_dtypes_name(spec.dtype)},
                        {"attention", spec.mla ? "MLA" : "KV"},
                        {"layers", spec.num_layers},
                        {"tokens", tokens},
                        {"sequence_tokens", length},
                        {"seqs", o.seqs},
                        {"block_size", spec.block_size},
                        {"bytes_per_token", per_token},
                        {"bytes_per_block", block.total()},
                        {"scale_bytes_per_block", block.scales},
                        {"blocks_per_seq", blocks_per_seq},
                        {"bytes_per_seq", seq_bytes},
                        {"key_tails_per_seq", tails_per_seq},
                        {"key_tail_bytes", tail_bytes},
                        {"total_bytes", all_seqs},
                        {"total_gib", all_seqs / double(1ull << 30)}};
    if (!spec.mla) j.update({{"kv_heads", spec.num_kv_heads}, {"head_dim", spec.head_dim}});
    if (o.tp > 1) {
      j.update({{"tp", o.tp},
                {"model_kv_heads", all_kv_heads},
                {"kv_head_replicas", all_kv_heads >= o.tp ? 1 : o.tp / all_kv_heads}});
    }
    if (windowed) {
      nlohmann::json g = nlohmann::json::array();
      for (const GroupFigures& f : groups) {
        g.push_back({{"layers", f.spec.num_layers},
                     {"window", f.window},
                     {"blocks_per_seq", f.blocks_per_seq},
                     {"bytes_per_seq", f.bytes_per_seq}});
      }
      j.update({{"layer_groups", g}, {"bytes_per_seq_all_global", per_seq}});
    }
    if (budget) j.update({{"budget_bytes", *budget}, {"max_seqs_in_budget", seqs_in(*budget)}});
    if (policy.evicts()) j.update({{"kv_policy", kv_policy_name(policy.kind)}, {"kv_budget", policy.budget}});
    if (tiers) {
      j["kv_host_tier"] = {{"bytes", tiers->host_bytes},
                           {"blocks", tiers->host_blocks},
                           {"tokens", tiers->host_blocks * spec.block_size}};
      j["kv_disk_tier"] = {{"file_bytes_per_block", tiers->disk_file_bytes},
                           {"blocks", tiers->disk_blocks},
                           {"tokens", tiers->disk_blocks * spec.block_size}};
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("KV cache for %s: %zu layers, %s, %s elements, blocks of %zu tokens\n", label.c_str(), spec.num_layers,
              spec.mla ? fmt::format("MLA latent {} + rope {}", spec.kv_lora_rank, spec.rope_dim).c_str()
                       : fmt::format("{} KV heads x head dim {} (K and V)", spec.num_kv_heads, spec.head_dim).c_str(),
              kv_dtypes_name(spec.dtype).c_str(), spec.block_size);
  if (o.tp > 1) {
    std::printf("  tensor parallel over %zu ranks: each rank holds %zu of the %zu KV heads%s; figures per rank\n", o.tp,
                spec.num_kv_heads, all_kv_heads,
                all_kv_heads >= o.tp
                    ? ""
                    : fmt::format(" (more ranks than KV heads: each head replicated on {} ranks)", o.tp / all_kv_heads)
                          .c_str());
  }
  if (policy.evicts()) {
    std::printf("  KV policy %s: a sequence of %zu tokens holds at most %zu\n", policy.describe().c_str(), length,
                tokens);
  }
  std::printf("  per token, per layer : %14.1f bytes\n", per_layer_token);
  std::printf("  per token            : %14.1f bytes\n", per_token);
  std::printf("  per block            : %14zu bytes (%zu of them scales)\n", block.total(), block.scales);
  std::printf("  %s: %14zu bytes = %zu blocks for %zu tokens%s (%s)\n",
              windowed ? "all layers global    " : "per sequence         ", per_seq, blocks_per_seq, tokens,
              tails_per_seq ? fmt::format(" + {} key tails of {} bytes", tails_per_seq, tail_bytes).c_str() : "",
              gib(per_seq).c_str());
  if (windowed) {
    for (const GroupFigures& f : groups) {
      const std::string name = fmt::format("{} {} layers", f.spec.num_layers, f.window ? "window" : "global");
      std::printf("    %-19s: %14zu bytes = %zu blocks of %zu bytes%s\n", name.c_str(), f.bytes_per_seq,
                  f.blocks_per_seq, kv_bytes_per_block(f.spec).total(),
                  f.window ? fmt::format(" (window {})", f.window).c_str() : "");
    }
    std::printf("  per sequence, hybrid : %14zu bytes (%s, %.1fx less)\n", hybrid_per_seq, gib(hybrid_per_seq).c_str(),
                double(per_seq) / double(hybrid_per_seq));
  }
  std::printf("  total, %zu sequence%s   : %14zu bytes (%s)\n", o.seqs, o.seqs == 1 ? " " : "s", all_seqs,
              gib(all_seqs).c_str());
  if (budget) {
    std::printf("  budget %zu bytes (%s) holds %zu sequences of %zu tokens\n", *budget, gib(*budget).c_str(),
                seqs_in(*budget), tokens);
  }
  if (tiers) {
    std::printf("  host tier            : %14zu bytes = %zu blocks = %zu tokens (%zu sequences of %zu tokens)\n",
                tiers->host_bytes, tiers->host_blocks, tiers->host_blocks * spec.block_size,
                tiers->host_blocks / blocks_per_seq, tokens);
    if (tiers->disk_blocks > 0 || !o.disk_tier.empty()) {
      std::printf("  disk tier            : %zu block files of %zu bytes = %zu tokens (%zu sequences of %zu tokens)\n",
                  tiers->disk_blocks, tiers->disk_file_bytes, tiers->disk_blocks * spec.block_size,
                  tiers->disk_blocks / blocks_per_seq, tokens);
    }
  }
}

}  // namespace

void register_calc(CLI::App& app) {
  auto o = std::make_shared<CalcOptions>();
  CLI::App* cmd = app.add_subcommand("calc", "Predict KV cache memory (the engine allocates by the same formula)");
  cmd->add_option("-m,--model", o->model_path, "Read the shape from a GGUF model");
  std::string preset_names;
  for (const auto& p : kv_model_presets()) preset_names += (preset_names.empty() ? "" : ", ") + std::string(p.name);
  cmd->add_option("--preset", o->preset, "A known model shape: " + preset_names);
  cmd->add_option("--layers", o->layers, "Layers (explicit shape)");
  cmd->add_option("--kv-heads", o->kv_heads, "KV heads (explicit shape)");
  cmd->add_option("--head-dim", o->head_dim, "Head dimension (explicit shape)");
  cmd->add_option("--tokens", o->tokens, "Tokens per sequence (default: the model's context length)");
  cmd->add_option("--seqs", o->seqs, "Sequences")->check(CLI::Range(size_t{1}, size_t{1} << 30))->capture_default_str();
  add_kv_precision_options(*cmd, o->kv);
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block (power of two, 1..256)")->capture_default_str();
  cmd->add_option("--tp", o->tp, "Figures per rank of a model split over N tensor-parallel ranks (KV heads / N each)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--budget", o->budget, "Memory budget (e.g. 24GiB): how many sequences fit");
  cmd->add_option("--kv-host", o->host_tier, "A host-memory offload tier's budget (e.g. 64GiB): the tokens it holds");
  cmd->add_option("--kv-disk-size", o->disk_tier, "A disk offload tier's budget (e.g. 1TB): the tokens it holds");
  cmd->add_flag("--json", o->json, "Print JSON (bytes_per_token, total_bytes, max_seqs_in_budget, ...)");
  cmd->callback([o] { run(*o); });
}

}  // namespace kvs::cli
