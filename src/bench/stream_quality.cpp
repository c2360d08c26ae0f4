#include "bench/stream_quality.h"

#include <fmt/format.h>

#include <cmath>

namespace kvs {

Expected<StreamQuality> measure_stream_quality(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                               std::string_view text, const StreamPerplexityOptions& base,
                                               const std::vector<KvPolicyParams>& policies,
                                               const std::vector<size_t>& budgets) {
  StreamQuality q;
  q.context = model.config().context_length;
  // The full cache: one sequence over the first context of tokens, and the whole stream in chunks of a context.
  StreamPerplexityOptions full = base;
  full.kv.policy = {};
  full.max_tokens = std::min(q.context, base.max_tokens);
  auto in_context = evaluate_stream_perplexity(model, tokenizer, pool, text, full);
  if (!in_context) return in_context.status();
  q.full_in_context = in_context->perplexity;
  q.runs.push_back({.policy = {}, .result = std::move(in_context).value()});
  StreamPerplexityOptions strided = base;
  strided.kv.policy = {};
  auto recomputed = evaluate_strided_perplexity(model, tokenizer, pool, text, strided, q.context, q.context / 2);
  if (!recomputed) return recomputed.status();
  q.full_strided = std::move(recomputed).value();
  for (size_t budget : budgets) {
    StreamPerplexityOptions sliding = base;
    sliding.kv.policy = {};
    sliding.kv.window = budget;
    auto windowed = evaluate_stream_perplexity(model, tokenizer, pool, text, sliding);
    if (!windowed) return windowed.status();
    q.runs.push_back({.policy = {}, .kv_window = budget, .result = std::move(windowed).value()});
    for (const KvPolicyParams& policy : policies) {
      StreamPerplexityOptions o = base;
      o.kv.policy = policy;
      o.kv.policy.budget = budget;
      o.kv.policy = o.kv.policy.resolved(o.kv.block_size);
      auto r = evaluate_stream_perplexity(model, tokenizer, pool, text, o);
      if (!r) return r.status();
      q.stream_tokens = r->nll.size();
      q.runs.push_back({.policy = o.kv.policy, .result = std::move(r).value()});
    }
  }
  return q;
}

std::string stream_quality_markdown(const StreamQuality& q) {
  std::string out = fmt::format(
      "| policy | budget | ppl, first {} tokens | vs full | ppl, {} tokens | vs full (recomputed every {}) | KV "
      "blocks held | tokens evicted |\n|---|---|---|---|---|---|---|---|\n",
      q.context, q.stream_tokens, q.context / 2);
  const auto vs = [](double p, double base) { return fmt::format("{:+.1f}%", 100.0 * (p / base - 1.0)); };
  for (const StreamQualityRun& run : q.runs) {
    const StreamPerplexityResult& r = run.result;
    const bool full = run.budget() == 0;
    const double first = r.perplexity_of(0, q.context);
    out += fmt::format(
        "| {} | {} | {:.4f} | {} | {} | {} | {} | {} |\n", stream_quality_label(run),
        full ? "context" : std::to_string(run.budget()), first, vs(first, q.full_in_context),
        full ? fmt::format("{:.4f} (recomputed)", q.full_strided.perplexity) : fmt::format("{:.4f}", r.perplexity),
        full ? "" : vs(r.perplexity, q.full_strided.perplexity), r.kv_blocks_peak, r.evicted_tokens);
  }
  return out;
}

std::string stream_quality_label(const StreamQualityRun& run) {
  if (run.kv_window > 0) return "sliding window, positions in the sequence";
  if (!run.policy.evicts()) return "full";
  const KvPolicyParams& p = run.policy;
  std::string label(kv_policy_name(p.kind));
  if (p.kind == KvPolicyKind::kSinks || (p.kind == KvPolicyKind::kHeavyHitters && p.sinks > 0))
    label += fmt::format(", {} sinks", p.sinks);
  if (p.kind == KvPolicyKind::kHeavyHitters) {
    label += fmt::format(", {} recent", p.recent);
    if (p.scores == KvScoreScope::kPooled) label += ", pooled";
    if (p.per_query_scores) label += ", per query";
  }
  return label;
}

std::vector<PlotPanel> stream_quality_panels(const StreamQuality& q, size_t budget, size_t bucket) {
  static const char* colors[] = {"#000000", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"};
  PlotPanel panel{.title = fmt::format("NLL against position, KV budget {} (context {})", budget, q.context),
                  .x_label = "position in the stream (tokens)",
                  .y_label = fmt::format("mean NLL over {} tokens (nats)", bucket),
                  .legend_at_bottom = false,
                  .x_ticks_at_points = false,
                  .y_from_zero = false};
  size_t color = 0;
  const auto add = [&](std::string name, const StreamPerplexityResult& r) {
    PlotSeries s{.name = std::move(name), .color = colors[color++ % 6]};
    for (size_t b = 0; b + bucket <= r.nll.size(); b += bucket)
      s.points.emplace_back(double(b + bucket / 2), std::log(r.perplexity_of(b, b + bucket)));
    panel.series.push_back(std::move(s));
  };
  add(fmt::format("full, recomputed every {}", q.context / 2), q.full_strided);
  for (const StreamQualityRun& run : q.runs) {
    if (run.budget() == budget) add(stream_quality_label(run), run.result);
  }
  return {panel};
}

}  // namespace kvs
