// Prefill throughput, and the cost of a generated token with and without the KV cache.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "engine/bench_measure.h"

namespace kvs {

Expected<PrefillSet> measure_prefill(const LlamaModel& model, const BenchModelInfo& info, const BenchPlan& plan,
                                     double peak_gflops, BenchEnv& env) {
  const size_t longest = *std::max_element(plan.prefill_tokens.begin(), plan.prefill_tokens.end());
  const std::vector<TokenId> prompt = bench_tokens(longest, info.vocab, plan.seed);
  SequenceRunner runner(model, env.pool, longest, plan.max_batch_tokens);

  // Warm-up: pages the weights in and grows the activation buffers to the longest prompt.
  env.progress.step(fmt::format("prefill {} warm-up ({} tokens)", info.weight_type, longest));
  if (auto warm = runner.append(prompt); !warm) return warm.status();

  std::vector<std::vector<double>> tok_s(plan.prefill_tokens.size()), gflops(plan.prefill_tokens.size());
  for (size_t rep = 0; rep < plan.reps; ++rep) {
    for (size_t i = 0; i < plan.prefill_tokens.size(); ++i) {
      const size_t n = plan.prefill_tokens[i];
      env.progress.step(fmt::format("prefill {} {} tokens, rep {}/{}", info.weight_type, n, rep + 1, plan.reps));
      runner.reset();
      const double start = env.now();
      auto logits = runner.append(std::span(prompt).first(n));
      const double seconds = env.now() - start;
      if (!logits) return logits.status();
      const double flops = 2.0 * static_cast<double>(info.layer_params) * static_cast<double>(n) +
                           2.0 * static_cast<double>(info.output_params);
      tok_s[i].push_back(static_cast<double>(n) / seconds);
      gflops[i].push_back(flops / seconds * 1e-9);
    }
  }
  PrefillSet set{.model = info, .runs = {}};
  for (size_t i = 0; i < plan.prefill_tokens.size(); ++i) {
    PrefillFigures f{.tokens = plan.prefill_tokens[i], .tok_s = summarize(tok_s[i]), .gflops = summarize(gflops[i])};
    f.peak_fraction = peak_gflops > 0.0 ? f.gflops.mean / peak_gflops : 0.0;
    set.runs.push_back(f);
  }
  std::sort(set.runs.begin(), set.runs.end(), [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
  return set;
}

Expected<std::vector<CacheFigures>> measure_cache_vs_recompute(const LlamaModel& model, const BenchPlan& plan,
                                                               BenchEnv& env) {
  const size_t vocab = model.config().vocab_size;
  const size_t n_contexts = plan.cache_contexts.size();
  std::vector<std::vector<double>> cached(n_contexts), uncached(n_contexts), speedup(n_contexts);
  for (size_t rep = 0; rep < plan.reps; ++rep) {
    for (size_t i = 0; i < n_contexts; ++i) {
      const size_t context = plan.cache_contexts[i];
      const std::vector<TokenId> tokens = bench_tokens(context + 1, vocab, plan.seed + 2);
      // B: without a cache a step recomputes the whole history, as Generator does with the cache
      // off: a fresh runner, then every token again.
      env.progress.step(fmt::format("no KV cache: recompute {} tokens, rep {}/{}", context, rep + 1, plan.reps));
      const double start = env.now();
      auto runner = std::make_unique<SequenceRunner>(model, env.pool, context + 1, plan.max_batch_tokens);
      if (auto out = runner->append(std::span(tokens).first(context)); !out) return out.status();
      const double uncached_s = env.now() - start;

      // A: with the cache, one step at depth `context` (the same runner now holds the context).
      env.progress.step(fmt::format("KV cache: decode step at depth {}, rep {}/{}", context, rep + 1, plan.reps));
      double cached_s = 0.0;
      for (size_t s = 0; s < plan.cached_steps; ++s) {
        runner->truncate(context);
        const double step_start = env.now();
        if (auto out = runner->append(std::span(tokens).subspan(context, 1)); !out) return out.status();
        cached_s += env.now() - step_start;
      }
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
