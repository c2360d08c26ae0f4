// kvserve perplexity: the model's perplexity on a text file, chunk by chunk.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/kv_dtype_option.h"
#include "cli/model_options.h"
#include "engine/perplexity.h"

namespace kvs::cli {
namespace {

struct PerplexityCliOptions {
  ModelOptions model;
  std::string text_path;
  size_t max_bytes = 0;
  PerplexityOptions eval;
  KvPrecisionOptions kv{.both = "f32"};
};

void run(const PerplexityCliOptions& options) {
  PerplexityOptions eval = options.eval;
  const KvPrecision kv = parse_kv_precision(options.kv);
  eval.kv_dtype = kv.dtype;
  eval.kv_key_scales = kv.key_scale_axis;
  eval.kv_rotate_keys = kv.rotate_keys;
  eval.kv_window = kv.window;
  eval.kv_hybrid = kv.hybrid;
  std::ifstream in(options.text_path, std::ios::binary);
  if (!in) throw CommandError(fmt::format("cannot read text file '{}'", options.text_path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (options.max_bytes > 0 && text.size() > options.max_bytes) text.resize(options.max_bytes);
  LoadedModel loaded = load_model(options.model);
  auto result =
      evaluate_perplexity(*loaded.model, *loaded.tokenizer, *loaded.pool, text, eval, [](size_t done, size_t total) {
        std::fprintf(stderr, "\rkvserve: chunk %zu/%zu", done, total);
        if (done == total) std::fputc('\n', stderr);
      });
  if (!result) throw CommandError(result.status().message());
  for (size_t c = 0; c < result->chunk_mean_nll.size(); ++c) {
    std::printf("chunk %zu: mean nll %.6f\n", c, result->chunk_mean_nll[c]);
  }
  std::printf("text tokens %zu, chunks %zu x %zu tokens, mean nll %.8f, perplexity %.6f\n", result->text_tokens,
              result->chunk_mean_nll.size(), options.eval.chunk_tokens, result->mean_nll, result->perplexity);
  if (const auto& d = result->divergence) {
    std::printf(
        "kv %s against f32: perplexity %.6f vs %.6f (%+.3f%%), mean KL divergence %.3e nats, max %.3e, "
        "top-1 agreement %.2f%%\n",
        kv_dtypes_name(eval.kv_dtype).c_str(), result->perplexity, d->f32_perplexity,
        100.0 * (result->perplexity / d->f32_perplexity - 1.0), d->mean_kld, d->max_kld, 100.0 * d->top1_agreement);
  }
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto options = std::make_shared<PerplexityCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of the model on a text: chunks of L tokens, each BOS + chunk from an empty cache");
  add_model_options(*cmd, options->model);
  cmd->add_option("-f,--file", options->text_path, "Text file to evaluate")->required();
  cmd->add_option("--chunk", options->eval.chunk_tokens, "Tokens per chunk (L)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--chunks", options->eval.max_chunks, "Evaluate at most K chunks; 0 = all full chunks")
      ->capture_default_str();
  cmd->add_option("--bytes", options->max_bytes, "Use only the first N bytes of the file; 0 = all")
      ->capture_default_str();
  add_kv_precision_options(*cmd, options->kv);
  cmd->add_flag("--kld", options->eval.compare_with_f32,
                "Also run every chunk with an f32 KV cache: KL divergence and top-1 agreement against it");
  cmd->callback([options] { run(*options); });
}

}  // namespace kvs::cli
