// kvserve run: generate text from one prompt, streaming it to stdout; a summary goes to stderr.
#include <cstdio>
#include <memory>

#include "cli/kv_dtype_option.h"
#include "cli/model_options.h"
#include "engine/generator.h"
#include "kv/kv_sizing.h"
#include "tensor/isa.h"

namespace kvs::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  size_t max_new_tokens = 256;
  GenerationOptions generation;
  bool no_kv_cache = false;
  bool ignore_eos = false;
  std::string kv_memory;  // byte budget for the KV pool, e.g. 512MiB
  size_t kv_blocks = 0;
  std::string kv_dtype = "f32";
};

// --block-size with --kv-blocks or --kv-memory (at most one) fix the pool; by default it holds
// exactly what prompt + max tokens need.
SequenceKvOptions kv_options(const RunOptions& options, const ModelConfig& config) {
  SequenceKvOptions kv{.block_size = options.generation.kv.block_size,
                       .dtype = parse_engine_kv_dtype(options.kv_dtype)};
  KvCacheSpec spec{.num_layers = config.num_layers,
                   .num_kv_heads = config.num_kv_heads,
                   .head_dim = config.head_dim,
                   .dtype = kv.dtype,
                   .block_size = kv.block_size};
  if (Status s = spec.validate(); !s) throw CommandError("--block-size: " + s.message());
  if (!options.kv_memory.empty() && options.kv_blocks) throw CommandError("give --kv-memory or --kv-blocks, not both");
  kv.num_blocks = options.kv_blocks;
  if (!options.kv_memory.empty()) {
    auto budget = parse_byte_size(options.kv_memory);
    if (!budget) throw CommandError("--kv-memory: " + budget.status().message());
    kv.num_blocks = kv_blocks_in_budget(spec, *budget);
    if (kv.num_blocks == 0) {
      throw CommandError(fmt::format("--kv-memory {} ({} bytes) is smaller than one KV block of {} bytes",
                                     options.kv_memory, *budget, kv_bytes_per_block(spec).total()));
    }
  }
  return kv;
}

void run(const RunOptions& options) {
  LoadedModel loaded = load_model(options.model);
  const ModelConfig& config = loaded.model->config();
  const std::vector<TokenId> prompt = loaded.tokenizer->encode(options.prompt, loaded.tokenizer->add_bos_by_default());
  GenerationOptions generation = options.generation;
  generation.max_new_tokens = options.max_new_tokens;
  generation.use_kv_cache = !options.no_kv_cache;
  generation.stop_at_eos = !options.ignore_eos;
  generation.kv = kv_options(options, config);
  Generator generator(*loaded.model, *loaded.tokenizer, *loaded.pool);
  std::fputs(options.prompt.c_str(), stdout);
  auto result = generator.generate(prompt, generation, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!result) throw CommandError(result.status().message());
  if (result->finish_reason == FinishReason::kKvCacheFull) {
    std::fprintf(stderr, "kvserve: generation stopped early: %s\n", result->kv_message.c_str());
  }
  const size_t decode_steps = result->tokens.empty() ? 0 : result->tokens.size() - 1;
  const KvUsage& kv = result->kv_usage;
  std::fprintf(
      stderr,
      "kvserve: prompt %zu tokens, generated %zu tokens (%s), prefill %.1f tok/s, decode %.1f tok/s, "
      "KV cache %zu bytes allocated, %zu/%zu blocks used (%zu bytes, block %zu tokens; %s, %zu layers x %zu "
      "kv heads x %zu head dim, %s), %zu threads, %s kernels, kv cache %s\n",
      result->prompt_tokens, result->tokens.size(), std::string(finish_reason_name(result->finish_reason)).c_str(),
      result->prompt_tokens / std::max(result->prefill_seconds, 1e-9),
      decode_steps / std::max(result->decode_seconds, 1e-9), result->kv_bytes, kv.blocks_used, kv.blocks_total,
      kv.bytes_used, generation.kv.block_size, config.attention_kind().c_str(), config.num_layers, config.num_kv_heads,
      config.head_dim, std::string(kv_dtype_name(generation.kv.dtype)).c_str(), loaded.pool->num_threads(),
      std::string(isa_name(best_isa())).c_str(), options.no_kv_cache ? "off" : "on");
}

}  // namespace

void register_run(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout, summary to stderr)");
  add_model_options(*cmd, options->model);
  SamplingParams& s = options->generation.sampling;
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
  cmd->add_option("--stop", options->generation.stop_strings, "Stop when this text appears (repeatable)");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past the end-of-sequence token");
  cmd->add_flag("--no-kv-cache", options->no_kv_cache,
                "Baseline without a KV cache: recompute the whole history at every step");
  cmd->add_option("--block-size", options->generation.kv.block_size, "Tokens per KV block (power of two, 1..256)")
      ->capture_default_str();
  cmd->add_option("--kv-memory", options->kv_memory,
                  "KV pool budget, e.g. 512MiB or 2GiB (default: what the request needs)");
  cmd->add_option("--kv-blocks", options->kv_blocks, "KV pool size in blocks (instead of --kv-memory)");
  add_kv_dtype_option(*cmd, options->kv_dtype);
  cmd->add_option("--batch", options->generation.max_batch_tokens, "Prefill chunk size in tokens")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->callback([options] { run(*options); });
}

}  // namespace kvs::cli
