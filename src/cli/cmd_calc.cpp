// kvserve calc: how much KV memory a model needs, from the same layer groups and sizing functions the engine
// allocates with (kv/kv_pool_layout.h).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/kv_dtype_option.h"
#include "cli/model_options.h"
#include "core/byte_size.h"
#include "engine/capabilities.h"
#include "gguf/gguf.h"
#include "gpu/gpu_devices.h"
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
  std::string host_tier;       // --kv-host
  std::string disk_tier;       // --kv-disk-size
  size_t tp = 1;               // --tp: figures per rank of a model split over N ranks
  std::string device = "cpu";  // --device: where the pool lives (vulkan[:N]: the GPU's memory, above the tiers)
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

// Features that do not combine are refused as the engine refuses them (engine/capabilities.h).
void refuse_what_does_not_combine(const KvCacheSpec& spec, const Shape& shape, const KvOptions& kv,
                                  const KvPolicyParams& policy, const CalcOptions& o) {
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
}

// Every figure calc prints, one rank's under --tp.
struct CalcFigures {
  std::string label;
  KvCacheSpec spec;
  size_t all_kv_heads = 0;  // the model's (spec has one rank's)
  KvPolicyParams policy;
  size_t length = 0;  // tokens of a sequence
  size_t tokens = 0;  // of them, what it holds (at most a policy's budget)
  std::optional<size_t> budget;
  std::optional<KvTierCapacity> tiers;
  // --device vulkan: the pool in the GPU's memory, the top of the hierarchy: the device, and the bytes it has (the
  // --budget, else its largest device-local heap, which the weights and activations share).
  std::optional<GpuDeviceInfo> gpu;
  size_t gpu_pool_bytes = 0, gpu_pool_blocks = 0;
  KvBlockBytes block;
  size_t blocks_per_seq = 0, per_seq = 0;
  double per_token = 0, per_layer_token = 0;
  size_t tails_per_seq = 0, tail_bytes = 0;
  std::vector<GroupFigures> groups;
  size_t hybrid_per_seq = 0;
  bool windowed = false;
  size_t seq_bytes = 0, all_seqs = 0;
  size_t seqs_in_budget = 0;  // sequences of `tokens` in the budget
};

CalcFigures compute(const CalcOptions& o) {
  CalcFigures f;
  Shape shape = resolve_shape(o, f.label);
  KvCacheSpec& spec = shape.spec;
  const size_t context = shape.context;
  const KvOptions kv = parse_kv_precision(o.kv, {.block_size = o.block_size});
  spec.dtype = kv.dtype;
  spec.key_scale_axis = kv.key_scales;
  spec.rotate_keys = kv.rotate_keys;
  spec.block_size = kv.block_size;
  // Tensor parallelism: every figure below is one rank's, which holds its share of the KV heads (model/tensor_shard.h).
  f.all_kv_heads = spec.num_kv_heads;
  const KvPolicyParams policy = f.policy = kv.policy.resolved(spec.block_size);
  refuse_what_does_not_combine(spec, shape, kv, policy, o);
  if (o.tp > 1) {
    auto per_rank = kv_heads_per_rank(spec.num_kv_heads, o.tp);
    if (!per_rank) throw CommandError(per_rank.status().message());
    spec.num_kv_heads = *per_rank;
  }
  if (Status s = spec.validate(); !s) throw CommandError(s.message());
  const size_t length = f.length = o.tokens ? o.tokens : context;
  if (length == 0) throw CommandError("--tokens is required when the shape has no context length");
  // Under an eviction policy a sequence of any length holds at most its budget (blocks of whole budget slots).
  const size_t tokens = f.tokens = policy.evicts() ? std::min(length, policy.budget) : length;
  if (!o.budget.empty()) {
    auto b = parse_byte_size(o.budget);
    if (!b) throw CommandError("--budget: " + b.status().message());
    f.budget = *b;
  }
  // Offload tiers: what they hold in blocks of this format (the engine sizes them with the same function).
  if (!o.host_tier.empty() || !o.disk_tier.empty()) {
    const auto size = [](const char* flag, const std::string& text) -> size_t {
      if (text.empty()) return 0;
      auto b = parse_byte_size(text);
      if (!b) throw CommandError(fmt::format("{} {}: {}", flag, text, b.status().message()));
      return *b;
    };
    f.tiers = kv_tier_capacity(tier_format(spec), spec.block_size, size("--kv-host", o.host_tier),
                               size("--kv-disk-size", o.disk_tier));
  }
  f.block = kv_bytes_per_block(spec);
  if (const std::optional<size_t> index = vulkan_device(o.device)) {
    auto devices = list_gpu_devices();
    if (!devices) throw CommandError(fmt::format("--device {}: {}", o.device, devices.status().message()));
    if (*index >= devices->size()) {
      throw CommandError(fmt::format("--device {}: no Vulkan device {} ({} found: kvserve devices)", o.device, *index,
                                     devices->size()));
    }
    f.gpu = (*devices)[*index];
    f.gpu_pool_bytes = f.budget ? *f.budget : f.gpu->device_local_bytes;
    f.gpu_pool_blocks = f.gpu_pool_bytes / f.block.total();
  }
  f.blocks_per_seq = kv_blocks_for_tokens(tokens, spec.block_size);
  f.per_seq = kv_bytes_for_sequences(spec, tokens, 1);
  f.per_token = kv_bytes_per_token(spec);
  f.per_layer_token = f.per_token / static_cast<double>(spec.num_layers);
  f.tails_per_seq = kv_key_tails_for_sequences(spec, 1);
  f.tail_bytes = kv_key_tail_bytes(spec);
  // Sliding windows: each group's layers hold what their window reads (the engine's hybrid layout).
  const KvPoolGroups pools = kv_pool_groups({.spec = spec, .layer_windows = shape.layer_windows}, kv.window, kv.hybrid);
  for (size_t g = 0; g < pools.specs.size(); ++g) {
    const size_t window = pools.layers.groups[g].window;
    const size_t bytes = kv_bytes_for_sequences(pools.specs[g], tokens, 1, window);
    f.groups.push_back({.spec = pools.specs[g],
                        .window = window,
                        .bytes_per_seq = bytes,
                        .blocks_per_seq = kv_blocks_held(tokens, spec.block_size, window)});
    f.hybrid_per_seq += bytes;
  }
  f.windowed = f.groups.size() > 1 || f.groups[0].window > 0;
  // With windows, a sequence holds its groups' bytes; the plain figures are every layer holding every token.
  f.seq_bytes = f.windowed ? f.hybrid_per_seq : f.per_seq;
  f.all_seqs = f.seq_bytes * o.seqs;
  if (f.budget)
    f.seqs_in_budget = f.windowed ? *f.budget / f.seq_bytes : kv_max_seqs_in_budget(spec, tokens, *f.budget);
  f.spec = spec;
  return f;
}

void print_json(const CalcFigures& f, const CalcOptions& o) {
  nlohmann::json j = {{"model", f.label},
                      {"kv_dtype", kv_dtypes_name(f.spec.dtype)},
                      {"attention", f.spec.mla ? "MLA" : "KV"},
                      {"layers", f.spec.num_layers},
                      {"tokens", f.tokens},
                      {"sequence_tokens", f.length},
                      {"seqs", o.seqs},
                      {"block_size", f.spec.block_size},
                      {"bytes_per_token", f.per_token},
                      {"bytes_per_block", f.block.total()},
                      {"scale_bytes_per_block", f.block.scales},
                      {"blocks_per_seq", f.blocks_per_seq},
                      {"bytes_per_seq", f.seq_bytes},
                      {"key_tails_per_seq", f.tails_per_seq},
                      {"key_tail_bytes", f.tail_bytes},
                      {"total_bytes", f.all_seqs},
                      {"total_gib", f.all_seqs / double(1ull << 30)}};
  if (!f.spec.mla) j.update({{"kv_heads", f.spec.num_kv_heads}, {"head_dim", f.spec.head_dim}});
  if (o.tp > 1) {
    j.update({{"tp", o.tp},
              {"model_kv_heads", f.all_kv_heads},
              {"kv_head_replicas", f.all_kv_heads >= o.tp ? 1 : o.tp / f.all_kv_heads}});
  }
  if (f.windowed) {
    nlohmann::json g = nlohmann::json::array();
    for (const GroupFigures& group : f.groups) {
      g.push_back({{"layers", group.spec.num_layers},
                   {"window", group.window},
                   {"blocks_per_seq", group.blocks_per_seq},
                   {"bytes_per_seq", group.bytes_per_seq}});
    }
    j.update({{"layer_groups", g}, {"bytes_per_seq_all_global", f.per_seq}});
  }
  if (f.budget) j.update({{"budget_bytes", *f.budget}, {"max_seqs_in_budget", f.seqs_in_budget}});
  if (f.policy.evicts()) j.update({{"kv_policy", kv_policy_name(f.policy.kind)}, {"kv_budget", f.policy.budget}});
  if (f.gpu) {
    j["kv_gpu_pool"] = {{"device", f.gpu->name},
                        {"bytes", f.gpu_pool_bytes},
                        {"blocks", f.gpu_pool_blocks},
                        {"tokens", f.gpu_pool_blocks * f.spec.block_size}};
  }
  if (f.tiers) {
    j["kv_host_tier"] = {{"bytes", f.tiers->host_bytes},
                         {"blocks", f.tiers->host_blocks},
                         {"tokens", f.tiers->host_blocks * f.spec.block_size}};
    j["kv_disk_tier"] = {{"file_bytes_per_block", f.tiers->disk_file_bytes},
                         {"blocks", f.tiers->disk_blocks},
                         {"tokens", f.tiers->disk_blocks * f.spec.block_size}};
  }
  std::printf("%s\n", j.dump(2).c_str());
}

void print_text(const CalcFigures& f, const CalcOptions& o) {
  std::printf(
      "KV cache for %s: %zu layers, %s, %s elements, blocks of %zu tokens\n", f.label.c_str(), f.spec.num_layers,
      f.spec.mla ? fmt::format("MLA latent {} + rope {}", f.spec.kv_lora_rank, f.spec.rope_dim).c_str()
                 : fmt::format("{} KV heads x head dim {} (K and V)", f.spec.num_kv_heads, f.spec.head_dim).c_str(),
      kv_dtypes_name(f.spec.dtype).c_str(), f.spec.block_size);
  if (o.tp > 1) {
    std::printf("  tensor parallel over %zu ranks: each rank holds %zu of the %zu KV heads%s; figures per rank\n", o.tp,
                f.spec.num_kv_heads, f.all_kv_heads,
                f.all_kv_heads >= o.tp ? ""
                                       : fmt::format(" (more ranks than KV heads: each head replicated on {} ranks)",
                                                     o.tp / f.all_kv_heads)
                                             .c_str());
  }
  if (f.policy.evicts()) {
    std::printf("  KV policy %s: a sequence of %zu tokens holds at most %zu\n", f.policy.describe().c_str(), f.length,
                f.tokens);
  }
  std::printf("  per token, per layer : %14.1f bytes\n", f.per_layer_token);
  std::printf("  per token            : %14.1f bytes\n", f.per_token);
  std::printf("  per block            : %14zu bytes (%zu of them scales)\n", f.block.total(), f.block.scales);
  std::printf("  %s: %14zu bytes = %zu blocks for %zu tokens%s (%s)\n",
              f.windowed ? "all layers global    " : "per sequence         ", f.per_seq, f.blocks_per_seq, f.tokens,
              f.tails_per_seq ? fmt::format(" + {} key tails of {} bytes", f.tails_per_seq, f.tail_bytes).c_str() : "",
              gib(f.per_seq).c_str());
  if (f.windowed) {
    for (const GroupFigures& group : f.groups) {
      const std::string name = fmt::format("{} {} layers", group.spec.num_layers, group.window ? "window" : "global");
      std::printf("    %-19s: %14zu bytes = %zu blocks of %zu bytes%s\n", name.c_str(), group.bytes_per_seq,
                  group.blocks_per_seq, kv_bytes_per_block(group.spec).total(),
                  group.window ? fmt::format(" (window {})", group.window).c_str() : "");
    }
    std::printf("  per sequence, hybrid : %14zu bytes (%s, %.1fx less)\n", f.hybrid_per_seq,
                gib(f.hybrid_per_seq).c_str(), double(f.per_seq) / double(f.hybrid_per_seq));
  }
  std::printf("  total, %zu sequence%s   : %14zu bytes (%s)\n", o.seqs, o.seqs == 1 ? " " : "s", f.all_seqs,
              gib(f.all_seqs).c_str());
  if (f.budget) {
    std::printf("  budget %zu bytes (%s) holds %zu sequences of %zu tokens\n", *f.budget, gib(*f.budget).c_str(),
                f.seqs_in_budget, f.tokens);
  }
  if (f.gpu) {
    std::printf(
        "  GPU pool             : %14zu bytes = %zu blocks = %zu tokens (%zu sequences of %zu tokens) on %s%s\n",
        f.gpu_pool_bytes, f.gpu_pool_blocks, f.gpu_pool_blocks * f.spec.block_size,
        f.gpu_pool_blocks / f.blocks_per_seq, f.tokens, f.gpu->name.c_str(),
        f.budget ? "" : " (its device-local memory, which the weights share: --budget for the pool's own)");
  }
  if (f.tiers) {
    std::printf("  host tier            : %14zu bytes = %zu blocks = %zu tokens (%zu sequences of %zu tokens)\n",
                f.tiers->host_bytes, f.tiers->host_blocks, f.tiers->host_blocks * f.spec.block_size,
                f.tiers->host_blocks / f.blocks_per_seq, f.tokens);
    if (f.tiers->disk_blocks > 0 || !o.disk_tier.empty()) {
      std::printf("  disk tier            : %zu block files of %zu bytes = %zu tokens (%zu sequences of %zu tokens)\n",
                  f.tiers->disk_blocks, f.tiers->disk_file_bytes, f.tiers->disk_blocks * f.spec.block_size,
                  f.tiers->disk_blocks / f.blocks_per_seq, f.tokens);
    }
  }
}

void run(const CalcOptions& o) {
  const CalcFigures f = compute(o);
  if (o.json) {
    print_json(f, o);
  } else {
    print_text(f, o);
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
  cmd->add_option("--device", o->device,
                  "Where the pool lives: cpu, or vulkan[:N]: the pool in GPU N's memory (the --budget, else the "
                  "device's memory), above the --kv-host and --kv-disk-size tiers: what each holds in tokens")
      ->capture_default_str();
  cmd->add_option("--kv-host", o->host_tier, "A host-memory offload tier's budget (e.g. 64GiB): the tokens it holds");
  cmd->add_option("--kv-disk-size", o->disk_tier, "A disk offload tier's budget (e.g. 1TB): the tokens it holds");
  cmd->add_flag("--json", o->json, "Print JSON (bytes_per_token, total_bytes, max_seqs_in_budget, ...)");
  cmd->callback([o] { run(*o); });
}

}  // namespace kvs::cli
