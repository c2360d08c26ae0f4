// kvserve perplexity: the model's perplexity on a text file, chunk by chunk; or (--stream N) of its first N
// tokens as one sequence through a cache bounded by an eviction policy, and (--policies, --budgets) the table
// and plot of every policy at every budget against the full cache.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench/stream_quality.h"
#include "cli/kv_dtype_option.h"
#include "cli/model_options.h"
#include "eval/perplexity.h"
#include "eval/stream_perplexity.h"

namespace kvs::cli {
namespace {

struct PerplexityCliOptions {
  ModelOptions model;
  std::string text_path;
  size_t max_bytes = 0;
  PerplexityOptions eval;
  KvPrecisionOptions kv{.both = "f32"};
  size_t stream_tokens = 0;           // --stream
  std::string nll_path;               // --nll-out
  std::vector<std::string> policies;  // --policies
  std::vector<size_t> budgets;        // --budgets
  std::string plot_path;              // --plot
  size_t plot_budget = 0;             // --plot-budget (0: the middle of --budgets)
  size_t bucket = 256;                // --bucket
  size_t block_size = 16;             // --block-size
};

std::string read_text(const PerplexityCliOptions& options) {
  std::ifstream in(options.text_path, std::ios::binary);
  if (!in) throw CommandError(fmt::format("cannot read text file '{}'", options.text_path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (options.max_bytes > 0 && text.size() > options.max_bytes) text.resize(options.max_bytes);
  return text;
}

// A policy of --policies: its kind, then options after colons: sinks=N, recent=N, pooled, per-query.
KvPolicyParams parse_policy_spec(const std::string& spec) {
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t colon = spec.find(':', begin);
    parts.push_back(spec.substr(begin, colon - begin));
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  auto kind = parse_kv_policy_kind(parts[0]);
  if (!kind) throw CommandError("--policies: " + kind.status().message());
  KvPolicyParams p{.kind = *kind};
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& o = parts[i];
    const auto number = [&](size_t prefix) {
      try {
        return static_cast<size_t>(std::stoul(o.substr(prefix)));
      } catch (const std::exception&) {
        throw CommandError(fmt::format("--policies: '{}' in '{}' needs a number", o, spec));
      }
    };
    if (o == "pooled") {
      p.scores = KvScoreScope::kPooled;
    } else if (o == "per-query") {
      p.per_query_scores = true;
    } else if (o.starts_with("sinks=")) {
      p.sinks = number(6);
    } else if (o.starts_with("recent=")) {
      p.recent = number(7);
    } else {
      throw CommandError(
          fmt::format("--policies: unknown option '{}' in '{}' (sinks=N, recent=N, pooled, per-query)", o, spec));
    }
  }
  return p;
}

// --stream: one sequence, under the KV flags' policy (a single run) or every --policies x --budgets.
void run_stream(const PerplexityCliOptions& options, const KvOptions& kv) {
  const std::string text = read_text(options);
  LoadedModel loaded = load_model(options.model);
  if (serve_unless_root(loaded)) return;  // an MPI rank above 0 (--tp)
  StreamPerplexityOptions o{
      .max_tokens = options.stream_tokens,
      .kv = {.block_size = kv.block_size, .dtype = kv.dtype, .key_scales = kv.key_scales, .policy = kv.policy}};
  if (options.policies.empty()) {
    auto r = evaluate_stream_perplexity(loaded.engine_model(), *loaded.tokenizer, *loaded.pool, text, o);
    if (!r) throw CommandError(r.status().message());
    if (!options.nll_path.empty()) {
      std::string tsv = "position\tnll\n";
      for (size_t i = 0; i < r->nll.size(); ++i) tsv += fmt::format("{}\t{:.6f}\n", i, r->nll[i]);
      write_text_file(options.nll_path, tsv);
    }
    std::printf(
        "stream of %zu tokens, KV policy %s: mean nll %.8f, perplexity %.6f, at most %zu KV blocks of %zu "
        "tokens held, %llu tokens evicted\n",
        r->nll.size(), kv.policy.resolved(options.block_size).describe().c_str(), r->mean_nll, r->perplexity,
        r->kv_blocks_peak, options.block_size, static_cast<unsigned long long>(r->evicted_tokens));
    return;
  }
  std::vector<KvPolicyParams> policies;
  for (const std::string& spec : options.policies) policies.push_back(parse_policy_spec(spec));
  if (options.budgets.empty()) throw CommandError("--policies needs --budgets (tokens held, e.g. 64,128,256)");
  auto q = measure_stream_quality(loaded.engine_model(), *loaded.tokenizer, *loaded.pool, text, o, policies,
                                  options.budgets);
  if (!q) throw CommandError(q.status().message());
  std::fputs(stream_quality_markdown(*q).c_str(), stdout);
  if (!options.plot_path.empty()) {
    const size_t budget = options.plot_budget > 0 ? options.plot_budget : options.budgets[options.budgets.size() / 2];
    write_text_file(options.plot_path, render_svg(stream_quality_panels(*q, budget, options.bucket)));
  }
}

void run(const PerplexityCliOptions& options) {
  PerplexityOptions eval = options.eval;
  const KvOptions kv = parse_kv_precision(options.kv, {.block_size = options.block_size});
  if (options.stream_tokens > 0) return run_stream(options, kv);
  if (!options.policies.empty() || kv.policy.evicts())
    throw CommandError("eviction policies (--kv-policy, --policies) are measured on one stream: give --stream N");
  eval.kv = kv;
  eval.mla_form = parse_mla_form(options.kv);
  const std::string text = read_text(options);
  LoadedModel loaded = load_model(options.model);
  if (serve_unless_root(loaded)) return;  // an MPI rank above 0 (--tp)
  auto result = evaluate_perplexity(loaded.engine_model(), *loaded.tokenizer, *loaded.pool, text, eval,
                                    [](size_t done, size_t total) {
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
        kv_dtypes_name(eval.kv.dtype).c_str(), result->perplexity, d->f32_perplexity,
        100.0 * (result->perplexity / d->f32_perplexity - 1.0), d->mean_kld, d->max_kld, 100.0 * d->top1_agreement);
  }
  print_gpu_profile(loaded);
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
  cmd->add_option("--stream", options->stream_tokens,
                  "Score the first N tokens as one sequence (BOS + text, never restarted) through a cache under "
                  "--kv-policy: StreamingLLM's and H2O's protocol; N may exceed the context under a policy");
  cmd->add_option("--nll-out", options->nll_path, "With --stream: write each position's NLL (TSV)");
  cmd->add_option("--policies", options->policies,
                  "With --stream: the quality table of these policies at every --budgets, against the full cache: "
                  "window, sinks, h2o, comma-separated, each with options after colons (sinks=N, recent=N, pooled, "
                  "per-query), e.g. sinks,h2o:sinks=4:pooled")
      ->delimiter(',');
  cmd->add_option("--budgets", options->budgets, "With --policies: KV budgets in tokens, comma-separated")
      ->delimiter(',');
  cmd->add_option("--plot", options->plot_path, "With --policies: an SVG of NLL against position");
  cmd->add_option("--plot-budget", options->plot_budget, "The budget the plot shows (default: the middle one)");
  cmd->add_option("--bucket", options->bucket, "Positions averaged per point of the plot")->capture_default_str();
  cmd->add_option("--block-size", options->block_size, "Tokens per KV block with --stream")->capture_default_str();
  cmd->callback([options] { run(*options); });
}

}  // namespace kvs::cli
