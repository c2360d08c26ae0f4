// Decode throughput at several context depths, paged vs contiguous KV, and the memory roofline.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "engine/bench_measure.h"
#include "tensor/probe.h"

namespace kvs {
namespace {

struct Layout {
  const char* name;
  SequenceRunner* runner;
};

// Weights plus the K/V read per decoded token, at the mean context of a run of `tokens` steps from
// `depth` (step k attends to depth + k + 1 positions).
double decode_bytes_per_token(const BenchModelInfo& info, size_t depth, size_t tokens) {
  const double mean_context = static_cast<double>(depth) + static_cast<double>(tokens + 1) / 2.0;
  return static_cast<double>(info.matrix_bytes) + mean_context * static_cast<double>(info.kv_bytes_per_token);
}

}  // namespace

Expected<DecodeSection> measure_decode(const LlamaModel& model, const BenchModelInfo& info, const BenchPlan& plan,
                                       BenchEnv& env) {
  std::vector<size_t> depths = plan.decode_depths;
  // Deepest first: both runners are filled once to the deepest depth and truncated back for the rest.
  std::sort(depths.begin(), depths.end(), std::greater<>());
  const size_t deepest = depths.front(), roofline_depth = depths.back();
  const size_t capacity = deepest + plan.decode_tokens;
  SequenceRunner paged(model, env.pool, capacity, plan.max_batch_tokens, {.block_size = plan.paging_block_size});
  SequenceRunner contiguous(model, env.pool, capacity, plan.max_batch_tokens, {.block_size = 0});
  const std::vector<TokenId> context = bench_tokens(deepest, info.vocab, plan.seed + 1);
  const TokenId first = bench_tokens(1, info.vocab, plan.seed + 3).front();
  const Layout layouts[2] = {{"paged", &paged}, {"contiguous", &contiguous}};
  for (const Layout& layout : layouts) {
    env.progress.step(fmt::format("decode: fill the {} KV cache with {} tokens", layout.name, deepest));
    if (deepest > 0) {
      if (auto out = layout.runner->append(context); !out) return out.status();
    }
    // Warm-up steps (untimed) past the context, then back.
    if (auto warm = timed_decode(*layout.runner, first, std::min<size_t>(2, plan.decode_tokens), env.now); !warm)
      return warm.status();
    layout.runner->truncate(deepest);
  }

  DecodeSection section;
  std::vector<double> probes, roofline_gbs, fractions;
  const auto probe = [&] { probes.push_back(measure_memory_bandwidth_gbs(env.pool, plan.probe_bytes)); };
  for (size_t depth : depths) {
    const bool roofline = depth == roofline_depth;
    const double bytes = decode_bytes_per_token(info, depth, plan.decode_tokens);
    std::vector<double> tok_s[2], cost;
    for (size_t rep = 0; rep < plan.reps; ++rep) {
      if (roofline) probe();
      double seconds[2] = {0.0, 0.0};
      for (size_t k = 0; k < 2; ++k) {
        const size_t which = rep % 2 == 0 ? k : 1 - k;  // A B, then B A: cancels a linear drift
        const Layout& layout = layouts[which];
        env.progress.step(fmt::format("decode {} tokens at depth {}, {}, rep {}/{}{}", plan.decode_tokens, depth,
                                      layout.name, rep + 1, plan.reps,
                                      roofline && k == 0 ? " (after a bandwidth probe)" : ""));
        layout.runner->truncate(depth);
        auto s = timed_decode(*layout.runner, first, plan.decode_tokens, env.now);
        if (!s) return s.status();
        seconds[which] = *s;
        tok_s[which].push_back(static_cast<double>(plan.decode_tokens) / *s);
      }
      cost.push_back((seconds[0] / seconds[1] - 1.0) * 100.0);
      if (roofline) roofline_gbs.push_back(bytes * tok_s[0].back() * 1e-9);
    }
    if (roofline) {
      env.progress.step("bandwidth probe");
      probe();
      for (size_t rep = 0; rep < roofline_gbs.size(); ++rep) {
        fractions.push_back(roofline_gbs[rep] / ((probes[rep] + probes[rep + 1]) / 2.0));
      }
    }
    std::vector<double> gbs;
    for (double t : tok_s[0]) gbs.push_back(bytes * t * 1e-9);
    section.decode.push_back({.depth = depth,
                              .tokens = plan.decode_tokens,
                              .paged_tok_s = summarize(tok_s[0]),
                              .contiguous_tok_s = summarize(tok_s[1]),
                              .paging_cost_percent = summarize(cost),
                              .bytes_per_token = bytes,
                              .bandwidth_gbs = summarize(gbs)});
  }
  std::reverse(section.decode.begin(), section.decode.end());
  section.roofline = {.depth = roofline_depth,
                      .probe_gbs = summarize(probes),
                      .decode_gbs = summarize(roofline_gbs),
                      .fraction = summarize(fractions)};
  return section;
}

}  // namespace kvs
