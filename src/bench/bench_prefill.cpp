// Prefill throughput, and the cost of a generated token with and without the KV cache.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "bench/bench_measure.h"
#include "tensor/matmul.h"

namespace kvs {

Expected<PrefillSet> measure_prefill(const DecoderModel& model, const BenchModelInfo& info, const BenchPlan& plan,
                                     double peak_gflops, BenchEnv& env) {
  const size_t longest = *std::max_element(plan.prefill_tokens.begin(), plan.prefill_tokens.end());
  const std::vector<TokenId> prompt = bench_tokens(longest, info.vocab, plan.seed);
  // No prefix cache: each repetition's prompt shares the warm-up's, and would be a cache hit.
  auto bench = bench_engine(model, env.pool, longest + 1, KvLayout::kPaged, plan, {}, /*prefix_caching=*/false);
  if (!bench) return bench.status();
  Engine& engine = *bench->engine;

  // Warm-up: pages the weights in and grows the activation buffers to the longest prompt.
  env.progress.step(fmt::format("prefill {} warm-up ({} tokens)", info.weight_type, longest));
  if (auto warm = timed_run(engine, prompt, 0, 0, env.now); !warm) return warm.status();

  std::vector<std::vector<double>> tok_s(plan.prefill_tokens.size()), gflops(plan.prefill_tokens.size());
  for (size_t rep = 0; rep < plan.reps; ++rep) {
    for (size_t i = 0; i < plan.prefill_tokens.size(); ++i) {
      const size_t n = plan.prefill_tokens[i];
      env.progress.step(fmt::format("prefill {} {} tokens, rep {}/{}", info.weight_type, n, rep + 1, plan.reps));
      auto run = timed_run(engine, std::span(prompt).first(n), 0, 0, env.now);
      if (!run) return run.status();
      const double seconds = run->prefill_seconds;
      const double flops = 2.0 * static_cast<double>(info.layer_params) * static_cast<double>(n) +
                           2.0 * static_cast<double>(info.output_params);
      tok_s[i].push_back(static_cast<double>(n) / seconds);
      gflops[i].push_back(flops / seconds * 1e-9);
    }
  }
  const DecoderWeights& w = model.weights();
  const DType type = w.layers.empty() ? w.output.type : w.layers[0].wq.type;
  PrefillSet set{
      .model = info, .int8_peak = matmul_activations(type, best_isa()) == MatmulActivations::kInt8Blocks, .runs = {}};
  for (size_t i = 0; i < plan.prefill_tokens.size(); ++i) {
    PrefillFigures f{.tokens = plan.prefill_tokens[i], .tok_s = summarize(tok_s[i]), .gflops = summarize(gflops[i])};
    f.peak_fraction = peak_gflops > 0.0 ? f.gflops.mean / peak_gflops : 0.0;
    set.runs.push_back(f);
  }
  std::sort(set.runs.begin(), set.runs.end(), [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
  return set;
}

Expected<std::vector<CacheFigures>> measure_cache_vs_recompute(const DecoderModel& model, const BenchPlan& plan,
                                                               BenchEnv& env) {
  const size_t vocab = model.config().vocab_size;
  const size_t n_contexts = plan.cache_contexts.size();
  const size_t longest = *std::max_element(plan.cache_contexts.begin(), plan.cache_contexts.end());
  auto bench = bench_engine(model, env.pool, longest + plan.cached_steps + 2, KvLayout::kPaged, plan);
  if (!bench) return bench.status();
  Engine& engine = *bench->engine;
  std::vector<std::vector<double>> cached(n_contexts), uncached(n_contexts), speedup(n_contexts);
  for (size_t rep = 0; rep < plan.reps; ++rep) {
    for (size_t i = 0; i < n_contexts; ++i) {
      const size_t context = plan.cache_contexts[i];
      const std::vector<TokenId> tokens = bench_tokens(context, vocab, plan.seed + 2);
      // B: without a cache (the engine's recompute_history baseline, `kvserve run --no-kv-cache`), the step
      // after the prompt recomputes the whole history of context + 1 tokens.
      env.progress.step(fmt::format("no KV cache: recompute {} tokens, rep {}/{}", context + 1, rep + 1, plan.reps));
      auto without = timed_run(engine, tokens, 0, 1, env.now, /*recompute_history=*/true);
      if (!without) return without.status();
      const double uncached_s = without->step_seconds.front();

      // A: with the cache, the mean of `cached_steps` decode steps from depth context + 1.
      env.progress.step(fmt::format("KV cache: decode steps at depth {}, rep {}/{}", context, rep + 1, plan.reps));
      auto with = timed_run(engine, tokens, 0, plan.cached_steps, env.now);
      if (!with) return with.status();
      double cached_s = 0.0;
      for (double s : with->step_seconds) cached_s += s;
      cached_s /= static_cast<double>(plan.cached_steps);
      cached[i].push_back(cached_s * 1e3);
      uncached[i].push_back(uncached_s * 1e3);
      speedup[i].push_back(uncached_s / cached_s);
    }
  }
  std::vector<CacheFigures> out;
  for (size_t i = 0; i < n_contexts; ++i) {
    out.push_back({.context = plan.cache_contexts[i],
                   .cached_ms = summarize(cached[i]),
                   .uncached_ms = summarize(uncached[i]),
                   .speedup = summarize(speedup[i])});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.context < b.context; });
  return out;
}

}  // namespace kvs
