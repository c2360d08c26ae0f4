// Decode throughput at several context depths, paged vs contiguous KV, and the memory roofline.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "bench/bench_measure.h"
#include "bench/probe.h"

namespace kvs {
namespace {

struct Layout {
  const char* name;
  Engine* engine;
};

// Weights plus the K/V read per decoded token, at the mean context of a run of `tokens` steps from
// `depth`: the prompt holds max(depth, 1) tokens, and timed step k attends to that + k + 1 positions.
double decode_bytes_per_token(const BenchModelInfo& info, size_t depth, size_t tokens) {
  const double mean_context = static_cast<double>(std::max<size_t>(depth, 1)) + static_cast<double>(tokens + 1) / 2.0;
  return static_cast<double>(info.matrix_bytes) + mean_context * static_cast<double>(info.kv_bytes_per_token);
}

// Per layout (0 paged, 1 contiguous), the samples of one depth.
struct DepthSamples {
  std::vector<double> tok_s[2], median_tok_s[2], cost, median_cost;
};

}  // namespace

Expected<DecodeSection> measure_decode(const DecoderModel& model, const BenchModelInfo& info, const BenchPlan& plan,
                                       BenchEnv& env) {
  std::vector<size_t> depths = plan.decode_depths;
  // Deepest first (the published order); each repetition computes its context afresh, untimed.
  std::sort(depths.begin(), depths.end(), std::greater<>());
  const size_t deepest = depths.front(), roofline_depth = depths.back();
  const size_t capacity = std::max<size_t>(deepest, 1) + plan.decode_tokens;
  auto paged = bench_engine(model, env.pool, capacity, KvLayout::kPaged, plan);
  if (!paged) return paged.status();
  auto contiguous = bench_engine(model, env.pool, capacity, KvLayout::kContiguous, plan);
  if (!contiguous) return contiguous.status();
  const std::vector<TokenId> context = bench_tokens(deepest, info.vocab, plan.seed + 1);
  const TokenId first = bench_tokens(1, info.vocab, plan.seed + 3).front();
  const Layout layouts[2] = {{"paged", paged->engine.get()}, {"contiguous", contiguous->engine.get()}};

  DecodeSection section;
  std::vector<double> probes, gbs_roofline, median_gbs_roofline, fractions, median_fractions;
  const auto probe = [&] { probes.push_back(measure_memory_bandwidth_gbs(env.pool, plan.probe_bytes)); };
  for (size_t depth : depths) {
    const bool roofline = depth == roofline_depth;
    const double bytes = decode_bytes_per_token(info, depth, plan.decode_tokens);
    DepthSamples d;
    for (size_t rep = 0; rep < plan.reps; ++rep) {
      if (roofline) probe();
      DecodeRates r[2];
      for (size_t k = 0; k < 2; ++k) {
        const size_t which = rep % 2 == 0 ? k : 1 - k;  // A B, then B A: cancels a linear drift
        const Layout& layout = layouts[which];
        env.progress.step(fmt::format("decode {} tokens at depth {}, {}, rep {}/{}{}", plan.decode_tokens, depth,
                                      layout.name, rep + 1, plan.reps,
                                      roofline && k == 0 ? " (after a bandwidth probe)" : ""));
        auto rate = decode_at_depth(*layout.engine, context, depth, first, plan.decode_tokens, env.now);
        if (!rate) return rate.status();
        r[which] = *rate;
        d.tok_s[which].push_back(rate->tok_s);
        d.median_tok_s[which].push_back(rate->median_tok_s);
      }
      d.cost.push_back((r[1].tok_s / r[0].tok_s - 1.0) * 100.0);
      d.median_cost.push_back((r[1].median_tok_s / r[0].median_tok_s - 1.0) * 100.0);
      if (roofline) {
        gbs_roofline.push_back(bytes * r[0].tok_s * 1e-9);
        median_gbs_roofline.push_back(bytes * r[0].median_tok_s * 1e-9);
      }
    }
    if (roofline) {
      env.progress.step("bandwidth probe");
      probe();
      for (size_t rep = 0; rep < gbs_roofline.size(); ++rep) {
        const double around = (probes[rep] + probes[rep + 1]) / 2.0;
        fractions.push_back(gbs_roofline[rep] / around);
        median_fractions.push_back(median_gbs_roofline[rep] / around);
      }
    }
    std::vector<double> gbs;
    for (double t : d.tok_s[0]) gbs.push_back(bytes * t * 1e-9);
    section.decode.push_back({.depth = depth,
                              .tokens = plan.decode_tokens,
                              .paged_tok_s = summarize(d.tok_s[0]),
                              .contiguous_tok_s = summarize(d.tok_s[1]),
                              .paging_cost_percent = summarize(d.cost),
                              .paged_median_tok_s = summarize(d.median_tok_s[0]),
                              .contiguous_median_tok_s = summarize(d.median_tok_s[1]),
                              .paging_cost_median_percent = summarize(d.median_cost),
                              .bytes_per_token = bytes,
                              .bandwidth_gbs = summarize(gbs)});
  }
  std::reverse(section.decode.begin(), section.decode.end());
  section.roofline = {.depth = roofline_depth,
                      .probe_gbs = summarize(probes),
                      .decode_gbs = summarize(gbs_roofline),
                      .fraction = summarize(fractions),
                      .decode_median_gbs = summarize(median_gbs_roofline),
                      .median_fraction = summarize(median_fractions)};
  return section;
}

}  // namespace kvs
