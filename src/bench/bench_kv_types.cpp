#include "bench/bench_kv_types.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>

#include "kv/kv_sizing.h"

namespace kvs {

Status KvTypesPlan::validate() const {
  if (types.empty()) return Status::invalid_argument("--kv-types needs at least one KV type");
  if (depths.empty()) return Status::invalid_argument("--kv-depths needs at least one depth");
  if (reps == 0 || decode_tokens == 0) return Status::invalid_argument("reps and decode tokens must be positive");
  return Status::ok();
}

Expected<std::vector<KvTypeFigures>> measure_kv_types(const DecoderModel& model, const KvTypesPlan& plan, BenchEnv& env,
                                                      const Model* runs_on) {
  KVS_RETURN_IF_ERROR(plan.validate());
  const size_t deepest = *std::max_element(plan.depths.begin(), plan.depths.end());
  const size_t capacity = std::max<size_t>(deepest, 1) + plan.decode_tokens;
  if (capacity > model.config().context_length) {
    return Status::out_of_range(fmt::format("depth {} + {} decode tokens exceeds the model's context of {}", deepest,
                                            plan.decode_tokens, model.config().context_length));
  }
  BenchPlan engine_plan;
  engine_plan.max_batch_tokens = plan.max_batch_tokens;
  engine_plan.paging_block_size = plan.block_size;
  std::vector<BenchEngine> engines;
  std::vector<KvTypeFigures> figures;
  for (const KvVariant& type : plan.types) {
    auto e = bench_engine(model, env.pool, capacity, KvLayout::kPaged, engine_plan, type, true, runs_on);
    if (!e) return e.status();
    // Over every layer group: bytes per position without windows, and sequences of budget_tokens as held.
    double bytes_per_token = 0.0;
    size_t held = 0;
    for (size_t g = 0; g < e->engine->kv().num_groups(); ++g) {
      const KvCacheConfig& c = e->engine->kv().group(g).config();
      bytes_per_token += kv_bytes_per_token(c.spec);
      held += kv_bytes_for_sequences(c.spec, plan.budget_tokens, 1, c.layer_window);
    }
    figures.push_back(
        {.type = type, .bytes_per_token = bytes_per_token, .seqs_in_budget = held ? plan.budget_bytes / held : 0});
    engines.push_back(std::move(e).value());
  }
  const size_t vocab = model.config().vocab_size;
  const std::vector<TokenId> context = bench_tokens(deepest, vocab, plan.seed + 1);
  const TokenId first = bench_tokens(1, vocab, plan.seed + 3).front();
  const size_t n = plan.types.size();
  for (size_t depth : plan.depths) {
    std::vector<std::vector<double>> tok_s(n), speedup(n);
    for (size_t rep = 0; rep < plan.reps; ++rep) {
      std::vector<double> rate(n);
      for (size_t k = 0; k < n; ++k) {
        const size_t t = rep % 2 == 0 ? k : n - 1 - k;
        env.progress.step(fmt::format("decode {} tokens at depth {}, kv {}, rep {}/{}", plan.decode_tokens, depth,
                                      plan.types[t].name(), rep + 1, plan.reps));
        auto r = decode_at_depth(*engines[t].engine, context, depth, first, plan.decode_tokens, env.now);
        if (!r) return r.status();
        rate[t] = r->tok_s;
        if (rep == 0) figures[t].bytes_held.push_back(r->kv_bytes_held);
      }
      for (size_t t = 0; t < n; ++t) {
        tok_s[t].push_back(rate[t]);
        speedup[t].push_back(rate[t] / rate[0]);
      }
    }
    for (size_t t = 0; t < n; ++t) {
      figures[t].tok_s.push_back(summarize(tok_s[t]));
      figures[t].speedup.push_back(summarize(speedup[t]));
    }
  }
  return figures;
}

std::string kv_types_table(const KvTypesPlan& plan, const std::vector<KvTypeFigures>& figures) {
  std::string out = fmt::format("{:<18} {:>14} {:>10}", "kv", "bytes/token", "seqs");
  for (size_t depth : plan.depths)
    out += fmt::format(" {:>34}", fmt::format("tok/s @{} (vs {}), MiB held", depth, plan.types[0].name()));
  out += "\n";
  for (const KvTypeFigures& f : figures) {
    out += fmt::format("{:<18} {:>14.1f} {:>10}", f.type.name(), f.bytes_per_token, f.seqs_in_budget);
    for (size_t d = 0; d < f.tok_s.size(); ++d) {
      out += fmt::format(" {:>34}", fmt::format("{:.2f} ({:.3f}x), {:.2f}", f.tok_s[d].mean, f.speedup[d].mean,
                                                double(f.bytes_held[d]) / double(1 << 20)));
    }
    out += "\n";
  }
  out += fmt::format(
      "seqs: sequences of {} tokens that fit in {} bytes; speed-ups are per repetition, {} reps of {} tokens; "
      "held: by the sequence at depth + {} tokens\n",
      plan.budget_tokens, plan.budget_bytes, plan.reps, plan.decode_tokens, plan.decode_tokens - 1);
  return out;
}

nlohmann::json kv_types_json(const KvTypesPlan& plan, const std::vector<KvTypeFigures>& figures) {
  const auto summary = [](const Summary& s) {
    return nlohmann::json{{"mean", s.mean}, {"min", s.min}, {"max", s.max}, {"stddev", s.stddev}, {"count", s.count}};
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const KvTypeFigures& f : figures) {
    nlohmann::json depths = nlohmann::json::array();
    for (size_t d = 0; d < f.tok_s.size(); ++d) {
      depths.push_back({{"depth", plan.depths[d]},
                        {"tok_s", summary(f.tok_s[d])},
                        {"speedup", summary(f.speedup[d])},
                        {"kv_bytes_held", f.bytes_held[d]}});
    }
    rows.push_back({{"kv_type", f.type.name()},
                    {"bytes_per_token", f.bytes_per_token},
                    {"seqs_in_budget", f.seqs_in_budget},
                    {"decode", depths}});
  }
  return {{"budget_bytes", plan.budget_bytes},   {"budget_tokens", plan.budget_tokens},
          {"decode_tokens", plan.decode_tokens}, {"reps", plan.reps},
          {"block_size", plan.block_size},       {"types", rows}};
}

std::vector<PlotPanel> kv_types_panels(const KvTypesPlan& plan, const std::vector<KvTypeFigures>& figures) {
  static constexpr std::array<const char*, 6> kColors = {"#1f77b4", "#d62728", "#2ca02c",
                                                         "#ff7f0e", "#9467bd", "#8c564b"};
  PlotPanel memory{.title = "KV memory a sequence holds",
                   .x_label = "sequence length (tokens)",
                   .y_label = "MiB held",
                   .series = {}};
  PlotPanel speed{.title = "Decode throughput vs depth",
                  .x_label = "tokens already in the KV cache",
                  .y_label = "tokens per second",
                  .legend_at_bottom = true,
                  .series = {}};
  for (size_t t = 0; t < figures.size(); ++t) {
    const KvTypeFigures& f = figures[t];
    PlotSeries held{.name = f.type.name(), .color = kColors[t % kColors.size()], .points = {}};
    PlotSeries rate = held;
    for (size_t d = 0; d < plan.depths.size(); ++d) {
      const double length = static_cast<double>(plan.depths[d] + plan.decode_tokens - 1);
      held.points.emplace_back(length, static_cast<double>(f.bytes_held[d]) / double(1 << 20));
      rate.points.emplace_back(static_cast<double>(plan.depths[d]), f.tok_s[d].mean);
    }
    memory.series.push_back(std::move(held));
    speed.series.push_back(std::move(rate));
  }
  return {memory, speed};
}

}  // namespace kvs
