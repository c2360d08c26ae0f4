// kvserve run: generate text from one prompt, streaming it to stdout; a summary goes to stderr.
#include <cstdio>
#include <memory>

#include "cli/model_options.h"
#include "engine/generator.h"

namespace kvs::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  size_t max_new_tokens = 256;
  GenerationOptions generation;
  bool no_kv_cache = false;
  bool ignore_eos = false;
};

void run(const RunOptions& options) {
  LoadedModel loaded = load_model(options.model);
  const ModelConfig& config = loaded.model->config();
  const std::vector<TokenId> prompt = loaded.tokenizer->encode(options.prompt, loaded.tokenizer->add_bos_by_default());
  GenerationOptions generation = options.generation;
  generation.max_new_tokens = options.max_new_tokens;
  generation.use_kv_cache = !options.no_kv_cache;
  generation.stop_at_eos = !options.ignore_eos;
  Generator generator(*loaded.model, *loaded.tokenizer, *loaded.pool);
  std::fputs(options.prompt.c_str(), stdout);
  auto result = generator.generate(prompt, generation, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!result) throw CommandError(result.status().message());
  const size_t decode_steps = result->tokens.empty() ? 0 : result->tokens.size() - 1;
  std::fprintf(stderr,
               "kvserve: prompt %zu tokens, generated %zu tokens (%s), prefill %.1f tok/s, decode %.1f tok/s, "
               "KV cache %zu bytes (%s, %zu layers x %zu kv heads x %zu head dim, fp32), %zu threads, kv cache %s\n",
               result->prompt_tokens, result->tokens.size(), std::string(finish_reason_name(result->finish_reason)).c_str(),
               result->prompt_tokens / std::max(result->prefill_seconds, 1e-9),
               decode_steps / std::max(result->decode_seconds, 1e-9), result->kv_bytes,
               config.attention_kind().c_str(), config.num_layers, config.num_kv_heads, config.head_dim,
               loaded.pool->num_threads(), options.no_kv_cache ? "off" : "on");
}

}  // namespace

void register_run(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout, summary to stderr)");
  add_model_options(*cmd, options->model);
  SamplingParams& s = options->generation.sampling;
  cmd->add_option("-p,--prompt", options->prompt, "Prompt text")->required();
  cmd->add_option("-n,--max-tokens", options->max_new_tokens, "Maximum tokens to generate")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30))->capture_default_str();
  cmd->add_option("--temp", s.temperature, "Sampling temperature; 0 = greedy")
      ->check(CLI::Range(0.0f, 100.0f))->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Keep the K most likely tokens; 0 = off")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling: smallest set with this probability mass; 1 = off")
      ->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Drop tokens less likely than min-p x the best; 0 = off")
      ->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repetition_penalty, "Penalty for recently seen tokens; 1 = off")
      ->check(CLI::Range(0.01f, 100.0f))->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed for sampling")->capture_default_str();
  cmd->add_option("--stop", options->generation.stop_strings, "Stop when this text appears (repeatable)");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past the end-of-sequence token");
  cmd->add_flag("--no-kv-cache", options->no_kv_cache,
                "Baseline without a KV cache: recompute the whole history at every step");
  cmd->add_option("--batch", options->generation.max_batch_tokens, "Prefill chunk size in tokens")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  cmd->callback([options] { run(*options); });
}

}  // namespace kvs::cli
