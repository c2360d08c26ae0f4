// kvserve run: generate text from one prompt, streaming it to stdout; a summary goes to stderr.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/kv_dtype_option.h"
#include "cli/kv_tier_option.h"
#include "cli/model_options.h"
#include "core/byte_size.h"
#include "engine/generate.h"
#include "grammar/json_schema.h"
#include "kv/kv_sizing.h"
#include "parallel/mpi_communicator.h"
#include "tensor/isa.h"

namespace kvs::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  size_t max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop_strings;
  bool no_kv_cache = false;
  bool no_prefix_cache = false;
  bool ignore_eos = false;
  bool json_object = false;  // JSON mode
  std::string json_schema;   // structured outputs: a JSON Schema file
  size_t block_size = 16;
  size_t max_batch_tokens = 512;
  std::string kv_memory;  // byte budget for the KV pool, e.g. 512MiB
  size_t kv_blocks = 0;
  KvPrecisionOptions kv{.both = "f32"};
  KvTierOptions tiers;
};

// One sequence on the engine. --block-size with --kv-blocks or --kv-memory (at most one) fix the pool;
// by default it holds exactly what prompt + max tokens need.
EngineConfig engine_config(const RunOptions& options, const Model& model, size_t prompt_tokens) {
  EngineConfig config{.max_batch_tokens = options.max_batch_tokens,
                      .max_seqs = 1,
                      .kv = parse_kv_precision(
                          options.kv, {.block_size = options.block_size, .prefix_caching = !options.no_prefix_cache}),
                      .mla_form = parse_mla_form(options.kv)};
  config.kv.tiers = parse_kv_tier_options(options.tiers);
  apply_kv_tier_engine_options(options.tiers, config);
  const KvCacheSpec spec = engine_kv_spec(model, config);
  if (Status s = spec.validate(); !s) throw CommandError(s.message());
  // (--kv-memory with --kv-blocks is refused by the engine's capability table.)
  config.kv.blocks = options.kv_blocks;
  if (!options.kv_memory.empty()) {
    auto budget = parse_byte_size(options.kv_memory);
    if (!budget) throw CommandError("--kv-memory: " + budget.status().message());
    if (kv_blocks_in_budget(spec, *budget, kv_key_tails_for_sequences(spec, config.max_seqs)) == 0) {
      throw CommandError(fmt::format("--kv-memory {} ({} bytes) is smaller than one KV block of {} bytes",
                                     options.kv_memory, *budget, kv_bytes_per_block(spec).total()));
    }
    config.kv.memory_bytes = *budget;
  } else if (config.kv.blocks == 0) {
    size_t tokens = std::min(model.config().context_length, prompt_tokens + options.max_new_tokens);
    if (config.kv.policy.evicts()) tokens = std::min(tokens, config.kv.policy.budget);  // what the policy holds at most
    config.kv.blocks = std::max<size_t>(1, kv_blocks_for_tokens(tokens, config.kv.block_size));
  }
  return config;
}

std::shared_ptr<const JsonSchema> load_json_schema(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CommandError(fmt::format("--json-schema: cannot read '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  auto schema = JsonSchema::compile(text.str());
  if (!schema) throw CommandError(fmt::format("--json-schema '{}': {}", path, schema.status().message()));
  return *schema;
}

// The summary line: tokens, rates, the KV cache and what made it.
void print_run_line(const RunOptions& options, const LoadedModel& loaded, const Engine& engine,
                    const EngineConfig& engine_options, const GenerationResult& result) {
  const ModelConfig& config = loaded.model->config();
  const size_t decode_steps = result.tokens.empty() ? 0 : result.tokens.size() - 1;
  const KvUsage kv = engine.kv().usage();
  std::fprintf(stderr,
               "kvserve: prompt %zu tokens (%zu from the prefix cache), generated %zu tokens (%s), prefill %.1f tok/s, "
               "decode %.1f tok/s, "
               "KV cache %zu bytes allocated, %zu/%zu blocks used (%zu bytes, block %zu tokens; %s, %s, %s, %s), "
               "weights %zu bytes (loaded in %.2f s), %s, kv cache %s\n",
               result.prompt_tokens, result.cached_tokens, result.tokens.size(),
               std::string(finish_reason_name(result.finish_reason)).c_str(),
               result.prompt_tokens / std::max(result.prefill_seconds, 1e-9),
               decode_steps / std::max(result.decode_seconds, 1e-9), engine.kv_storage_bytes(), result.kv_blocks_held,
               kv.blocks_total, result.kv_bytes_held, engine_options.kv.block_size, config.attention_kind().c_str(),
               engine.kv_layers().describe().c_str(),
               (config.is_mla() ? fmt::format("latent {} + rope {}", config.mla.kv_lora_rank, config.rope_dim)
                                : fmt::format("{} kv heads x {} head dim", config.num_kv_heads, config.head_dim))
                   .c_str(),
               kv_dtypes_name(engine_options.kv.dtype).c_str(), loaded.model->weights().matrix_bytes(),
               loaded.load_seconds,
               (loaded.gpu ? fmt::format("on {}", options.model.device)
                           : fmt::format("{} threads, {} kernels", loaded.pool->num_threads(), isa_name(best_isa())))
                   .c_str(),
               options.no_kv_cache ? "off" : "on");
}

// Under --tp: this rank's share and what its collectives cost.
void print_tensor_parallel_line(const LoadedModel& loaded, const Engine& engine) {
  const DecoderModel& m = *loaded.model;
  const ModelRunner& runner = engine.runner();
  std::fprintf(stderr,
               "kvserve: tensor parallel, %s (%s): weights %zu bytes, KV cache %zu bytes (this rank's); %llu "
               "collectives took %.3f ms (%.1f us each)\n",
               describe(m.shard_ranges(), m.shard()).c_str(), launched_by_mpi() ? "MPI" : "in process",
               m.weights().matrix_bytes(), engine.kv_storage_bytes(),
               static_cast<unsigned long long>(runner.num_collectives()), 1e3 * runner.communication_seconds(),
               1e6 * runner.communication_seconds() / std::max<double>(1.0, double(runner.num_collectives())));
}

// With offload tiers: what they held and served.
void print_tiers_line(const EngineMetrics& m) {
  std::string line =
      fmt::format("kvserve: KV tiers: {} prompt tokens loaded from them", m.prefix_cache_tier_hits_tokens_total);
  for (const KvTierMetrics& t : m.kv_tiers) {
    line += fmt::format("; {} holds {} blocks ({} bytes), {} hits, {} bytes in, {} bytes out", t.tier, t.blocks_held,
                        t.bytes_held, t.hits, t.bytes_stored, t.bytes_loaded);
    if (t.loads > 0 && t.load_seconds_sum > 0)
      line += fmt::format(", {:.2f} ms a block read", 1e3 * t.load_seconds_sum / t.loads);
  }
  if (m.kv_load_waits_total > 0) {
    line += fmt::format("; waited {:.0f} ms for the prefix to come up from disk{}", 1e3 * m.kv_load_wait_seconds_sum,
                        m.kv_load_timeouts_total > 0 ? " (cut short by --kv-load-timeout-ms)" : "");
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

// Under an eviction policy: the budget held and the tokens evicted.
void print_policy_line(const LoadedModel& loaded, const EngineConfig& engine_options, const GenerationResult& result,
                       const KvUsage& kv, const EngineMetrics& m) {
  const KvPolicyParams policy = engine_options.kv.policy.resolved(engine_options.kv.block_size);
  std::fprintf(
      stderr,
      "kvserve: KV policy %s: a sequence of %zu tokens, at most %zu blocks held (%zu tokens of room, %zu bytes; "
      "budget %zu tokens), %llu tokens evicted in %llu evictions\n",
      policy.describe().c_str(), result.prompt_tokens + result.tokens.size(), kv.blocks_used_peak,
      kv.blocks_used_peak * engine_options.kv.block_size,
      kv.blocks_used_peak * kv_bytes_per_block(engine_kv_spec(*loaded.model, engine_options)).total(), policy.budget,
      static_cast<unsigned long long>(m.kv_evicted_tokens_total),
      static_cast<unsigned long long>(m.kv_evictions_total));
}

void print_summary(const RunOptions& options, const LoadedModel& loaded, const Engine& engine,
                   const EngineConfig& engine_options, const GenerationResult& result) {
  print_run_line(options, loaded, engine, engine_options, result);
  if (loaded.tp) print_tensor_parallel_line(loaded, engine);
  const EngineMetrics m = engine.metrics();
  if (!m.kv_tiers.empty()) print_tiers_line(m);
  if (engine_options.kv.policy.evicts()) print_policy_line(loaded, engine_options, result, engine.kv().usage(), m);
}

void run(const RunOptions& options) {
  LoadedModel loaded = load_model(options.model);
  if (serve_unless_root(loaded)) return;  // an MPI rank above 0 (--tp): rank 0 runs the command
  RequestParams params{.prompt = loaded.tokenizer->encode(options.prompt, loaded.tokenizer->add_bos_by_default()),
                       .max_new_tokens = options.max_new_tokens,
                       .sampling = options.sampling,
                       .stop_strings = options.stop_strings,
                       .stop_at_eos = !options.ignore_eos,
                       .recompute_history = options.no_kv_cache,
                       .json_object = options.json_object};
  if (!options.json_schema.empty()) params.json_schema = load_json_schema(options.json_schema);
  const EngineConfig engine_options = engine_config(options, *loaded.model, params.prompt.size());
  auto engine = Engine::create(loaded.engine_model(), *loaded.tokenizer, *loaded.pool, engine_options);
  if (!engine) throw CommandError(engine.status().message());
  print_gpu_memory_line(loaded, **engine, engine_options);
  // The prompt is echoed once the request is accepted (a refused request prints nothing to stdout).
  bool echoed = false;
  const auto echo_prompt = [&] {
    if (!echoed) std::fputs(options.prompt.c_str(), stdout);
    echoed = true;
  };
  auto result = generate(**engine, std::move(params), [&](std::string_view piece) {
    echo_prompt();
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (!result) throw CommandError(result.status().message());
  echo_prompt();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (result->finish_reason == FinishReason::kDeviceError) {
    throw CommandError(fmt::format("--device {}: {}", options.model.device, result->finish_detail));
  }
  if (result->finish_reason == FinishReason::kKvCacheFull) {
    std::fprintf(stderr, "kvserve: generation stopped early: %s\n", result->finish_detail.c_str());
  }
  print_summary(options, loaded, **engine, engine_options, *result);
  print_gpu_profile(loaded);
}

}  // namespace

void register_run(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout, summary to stderr)");
  add_model_options(*cmd, options->model);
  SamplingParams& s = options->sampling;
  cmd->add_option("-p,--prompt", options->prompt, "Prompt text")->required();
  cmd->add_option("-n,--max-tokens", options->max_new_tokens, "Maximum tokens to generate")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--temp", s.temperature, "Sampling temperature; 0 = greedy")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Keep the K most likely tokens; 0 = off")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling: smallest set with this probability mass; 1 = off")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Drop tokens less likely than min-p x the best; 0 = off")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repetition_penalty, "Penalty for recently seen tokens; 1 = off")
      ->check(CLI::Range(0.01f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed for sampling")->capture_default_str();
  cmd->add_option("--stop", options->stop_strings, "Stop when this text appears (repeatable)");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past the end-of-sequence token");
  cmd->add_flag("--json-object", options->json_object,
                "JSON mode: the output is one JSON object (every token drawn among those that continue one, closed "
                "within -n tokens), as the server's response_format json_object");
  cmd->add_option("--json-schema", options->json_schema,
                  "Structured output: the output is an instance of the JSON Schema in this file, as the server's "
                  "response_format json_schema")
      ->excludes("--json-object");
  cmd->add_flag("--no-kv-cache", options->no_kv_cache,
                "Baseline without a KV cache: recompute the whole history at every step");
  cmd->add_flag("--no-prefix-cache", options->no_prefix_cache, "Do not look up cached prompt prefixes");
  cmd->add_option("--block-size", options->block_size, "Tokens per KV block (power of two, 1..256)")
      ->capture_default_str();
  cmd->add_option("--kv-memory", options->kv_memory,
                  "KV pool budget, e.g. 512MiB or 2GiB (default: what the request needs)");
  cmd->add_option("--kv-blocks", options->kv_blocks, "KV pool size in blocks (instead of --kv-memory)");
  add_kv_precision_options(*cmd, options->kv);
  add_kv_tier_options(*cmd, options->tiers);
  cmd->add_option("--batch", options->max_batch_tokens, "Prefill chunk size in tokens")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->callback([options] { run(*options); });
}

}  // namespace kvs::cli
