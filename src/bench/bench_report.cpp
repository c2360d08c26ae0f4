#include "bench/bench_report.h"

#include <fmt/format.h>

namespace kvs {
namespace {

using nlohmann::json;

json summary_json(const Summary& s) {
  return {{"mean", s.mean}, {"stddev", s.stddev}, {"min", s.min}, {"max", s.max}, {"count", s.count}};
}

// "27.31 ± 0.42" with `digits` decimals.
std::string pm(const Summary& s, int digits) {
  return fmt::format("{:.{}f} ± {:.{}f}", s.mean, digits, s.stddev, digits);
}
std::string range(const Summary& s, int digits) { return fmt::format("{:.{}f}–{:.{}f}", s.min, digits, s.max, digits); }
std::string percent(const Summary& s) { return fmt::format("{:+.1f}% ± {:.1f}", s.mean, s.stddev); }
std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

json model_json(const BenchModelInfo& m) {
  return {{"path", m.path},
          {"weight_type", m.weight_type},
          {"weight_layout", m.weight_layout},
          {"layers", m.layers},
          {"dim", m.dim},
          {"heads", m.heads},
          {"kv_heads", m.kv_heads},
          {"head_dim", m.head_dim},
          {"ffn", m.ffn},
          {"vocab", m.vocab},
          {"context", m.context},
          {"matrix_bytes", m.matrix_bytes},
          {"layer_params", m.layer_params},
          {"output_params", m.output_params},
          {"kv_bytes_per_token", m.kv_bytes_per_token},
          {"tensor_parallel", m.tensor_parallel}};
}

json prefill_details(const PrefillSet& set) {
  json runs = json::object();
  for (const PrefillFigures& f : set.runs) {
    runs[std::to_string(f.tokens)] = {
        {"tok_s", summary_json(f.tok_s)}, {"gflops", summary_json(f.gflops)}, {"peak_fraction", f.peak_fraction}};
  }
  return {{"model", model_json(set.model)}, {"peak", set.int8_peak ? "int8 dot" : "fp32 FMA"}, {"runs", runs}};
}

json paging_json(const PagingMemoryResult& p, const PagingWorkload& w) {
  return {{"sequences", p.num_sequences},
          {"min_tokens", w.min_tokens},
          {"max_tokens", w.max_tokens},
          {"seed", w.seed},
          {"block_size", p.block_size},
          {"slot_tokens", p.slot_tokens},
          {"tokens_held", p.tokens_held},
          {"paged_blocks", p.paged_blocks},
          {"paged_bytes", p.paged_bytes},
          {"contiguous_bytes", p.contiguous_bytes},
          {"token_bytes", p.token_bytes},
          {"paged_waste_percent", p.paged_waste_percent},
          {"contiguous_waste_percent", p.contiguous_waste_percent},
          {"budget_bytes", p.budget_bytes},
          {"contiguous_fit", p.contiguous_fit},
          {"paged_fit", p.paged_fit},
          {"fit_ratio", p.fit_ratio}};
}

}  // namespace

namespace {

// Every figure with its spread (summary_json: mean, stddev, min, max, samples), by measurement.
json bench_details_json(const BenchResults& r) {
  json d;
  d["peak_gflops"] = summary_json(r.peak_gflops);
  d["peak_int8_gops"] = summary_json(r.peak_int8_gops);
  d["prefill"] = prefill_details(r.prefill);
  if (r.prefill_extra) d["prefill_extra"] = prefill_details(*r.prefill_extra);
  for (const DecodeFigures& f : r.decode) {
    d["decode"][std::to_string(f.depth)] = {
        {"tokens", f.tokens},
        {"paged_tok_s", summary_json(f.paged_tok_s)},
        {"contiguous_tok_s", summary_json(f.contiguous_tok_s)},
        {"paging_cost_percent", summary_json(f.paging_cost_percent)},
        {"paged_median_step_tok_s", summary_json(f.paged_median_tok_s)},
        {"contiguous_median_step_tok_s", summary_json(f.contiguous_median_tok_s)},
        {"paging_cost_median_step_percent", summary_json(f.paging_cost_median_percent)},
        {"bytes_per_token", f.bytes_per_token},
        {"bandwidth_gbs", summary_json(f.bandwidth_gbs)}};
  }
  d["roofline"] = {{"depth", r.roofline.depth},
                   {"probe_gbs", summary_json(r.roofline.probe_gbs)},
                   {"decode_gbs", summary_json(r.roofline.decode_gbs)},
                   {"fraction", summary_json(r.roofline.fraction)},
                   {"decode_median_step_gbs", summary_json(r.roofline.decode_median_gbs)},
                   {"median_step_fraction", summary_json(r.roofline.median_fraction)}};
  for (const CacheFigures& c : r.cache) {
    d["cache"][std::to_string(c.context)] = {{"cached_ms", summary_json(c.cached_ms)},
                                             {"uncached_ms", summary_json(c.uncached_ms)},
                                             {"speedup", summary_json(c.speedup)}};
  }
  d["paging_memory"] = paging_json(r.paging, r.plan.paging);
  return d;
}

}  // namespace

json bench_json(const BenchResults& r, const BenchRunInfo& info) {
  json j;
  j["date"] = info.date;
  j["command"] = info.command;
  j["load_average_before"] = info.load_before;
  j["load_average_after"] = info.load_after;
  j["wall_seconds"] = info.wall_seconds;
  j["threads"] = r.threads;
  j["isa"] = r.isa;
  j["reps"] = r.plan.reps;
  j["model"] = model_json(r.model);
  j["peak_gflops"] = r.peak_gflops.mean;
  j["peak_int8_gops"] = r.peak_int8_gops.mean;
  j["memory_bandwidth_gbs"] = r.roofline.probe_gbs.mean;
  j["decode_bandwidth_gbs"] = r.roofline.decode_gbs.mean;
  j["roofline_fraction"] = r.roofline.fraction.mean;
  j["decode_bandwidth_gbs_median_step"] = r.roofline.decode_median_gbs.mean;
  j["roofline_fraction_median_step"] = r.roofline.median_fraction.mean;
  j["roofline_depth"] = r.roofline.depth;
  for (const PrefillFigures& f : r.prefill.runs) {
    const std::string key = std::to_string(f.tokens);
    j["prefill_tok_s"][key] = f.tok_s.mean;
    j["prefill_gflops"][key] = f.gflops.mean;
    j["prefill_peak_fraction"][key] = f.peak_fraction;
  }
  if (r.prefill_extra) {
    const std::string type = r.prefill_extra->model.weight_type;
    for (const PrefillFigures& f : r.prefill_extra->runs) {
      const std::string key = std::to_string(f.tokens);
      j["prefill_" + type + "_tok_s"][key] = f.tok_s.mean;
      j["prefill_" + type + "_gflops"][key] = f.gflops.mean;
      j["prefill_" + type + "_peak_fraction"][key] = f.peak_fraction;
    }
  }
  for (const DecodeFigures& d : r.decode) {
    const std::string key = std::to_string(d.depth);
    j["decode_tok_s"][key] = d.paged_tok_s.mean;
    j["decode_contiguous_tok_s"][key] = d.contiguous_tok_s.mean;
    j["paging_decode_cost_percent"][key] = d.paging_cost_percent.mean;
    j["decode_tok_s_median_step"][key] = d.paged_median_tok_s.mean;
    j["decode_contiguous_tok_s_median_step"][key] = d.contiguous_median_tok_s.mean;
    j["paging_decode_cost_percent_median_step"][key] = d.paging_cost_median_percent.mean;
    j["decode_bandwidth_gbs_by_depth"][key] = d.bandwidth_gbs.mean;
  }
  for (const CacheFigures& c : r.cache) {
    const std::string key = std::to_string(c.context);
    j["no_cache_speedup"][key] = c.speedup.mean;
    j["cache_ms_per_token"][key] = c.cached_ms.mean;
    j["no_cache_ms_per_token"][key] = c.uncached_ms.mean;
  }
  j["paging_waste_percent"] = r.paging.paged_waste_percent;
  j["contiguous_waste_percent"] = r.paging.contiguous_waste_percent;
  j["paging_fit_ratio"] = r.paging.fit_ratio;

  j["details"] = bench_details_json(r);
  j["notes"] = r.notes;
  return j;
}

namespace {

// The run's header: the model, the machine, and the probes' peaks.
void table_header(std::string& o, const BenchResults& r, const BenchRunInfo& info) {
  const auto line = [&o](const std::string& s) { o += s + "\n"; };
  const BenchModelInfo& m = r.model;
  const std::string split =
      m.tensor_parallel > 1 ? fmt::format(" on rank 0 of {} (tensor parallel)", m.tensor_parallel) : "";
  line(
      fmt::format("kvserve bench: {} ({}, {} layout; {} layers, dim {}, {} heads / {} KV heads, ffn {}, vocab {}; {} "
                  "of matrices{}), "
                  "{} threads, {}, {} reps, {}",
                  m.path, m.weight_type, m.weight_layout, m.layers, m.dim, m.heads, m.kv_heads, m.ffn, m.vocab,
                  mib(m.matrix_bytes), split, r.threads, r.isa, r.plan.reps, info.date));
  line(fmt::format("load average before: {}, after: {}; wall time {:.0f} s", info.load_before, info.load_after,
                   info.wall_seconds));
  line("Figures are mean ± sample standard deviation over the repetitions [min–max].");
  line("");
  line("| Machine probe | value |");
  line("|---|---|");
  line(fmt::format("| fp32 FMA peak, GFLOP/s | {} [{}] |", pm(r.peak_gflops, 1), range(r.peak_gflops, 1)));
  line(fmt::format("| int8 dot peak, GOP/s | {} [{}] |", pm(r.peak_int8_gops, 1), range(r.peak_int8_gops, 1)));
  line(fmt::format("| memory read bandwidth, GB/s | {} [{}] |", pm(r.roofline.probe_gbs, 1),
                   range(r.roofline.probe_gbs, 1)));
}

// Prefill per prompt length, of the model (and of the second model, when there is one).
void table_prefill(std::string& o, const BenchResults& r) {
  const auto line = [&o](const std::string& s) { o += s + "\n"; };
  for (const PrefillSet* set : {&r.prefill, r.prefill_extra ? &*r.prefill_extra : nullptr}) {
    if (!set) continue;
    line("");
    line(fmt::format("| Prefill ({}) tokens | tok/s | matmul GFLOP/s | of {} peak |", set->model.weight_type,
                     set->int8_peak ? "int8 dot" : "FMA"));
    line("|---|---|---|---|");
    for (const PrefillFigures& f : set->runs) {
      line(fmt::format("| {} | {} [{}] | {} | {:.0f}% |", f.tokens, pm(f.tok_s, 1), range(f.tok_s, 1), pm(f.gflops, 1),
                       100.0 * f.peak_fraction));
    }
  }
}

// Decode per depth, paged against contiguous, and the roofline.
void table_decode(std::string& o, const BenchResults& r) {
  const auto line = [&o](const std::string& s) { o += s + "\n"; };
  line("");
  line(
      fmt::format("Decode, {} tokens per repetition. tok/s = tokens / time; \"median step\" = 1 / the median step "
                  "time (robust to the host's occasional stalls). Paging cost = contiguous / paged - 1, per A/B pair.",
                  r.plan.decode_tokens));
  line("");
  line(
      "| Depth | paged tok/s | contiguous tok/s | paging cost | paged, median step | contiguous, median step | "
      "paging cost, median step | bytes/token | effective GB/s |");
  line("|---|---|---|---|---|---|---|---|---|");
  for (const DecodeFigures& d : r.decode) {
    line(fmt::format("| {} | {} [{}] | {} [{}] | {} | {} | {} | {} | {} | {} |", d.depth, pm(d.paged_tok_s, 2),
                     range(d.paged_tok_s, 2), pm(d.contiguous_tok_s, 2), range(d.contiguous_tok_s, 2),
                     percent(d.paging_cost_percent), pm(d.paged_median_tok_s, 2), pm(d.contiguous_median_tok_s, 2),
                     percent(d.paging_cost_median_percent), mib(static_cast<size_t>(d.bytes_per_token)),
                     pm(d.bandwidth_gbs, 1)));
  }
  const RooflineFigures& roof = r.roofline;
  line("");
  line(
      fmt::format("Roofline at depth {}: decode moves {} GB/s against probes of {} GB/s: {:.0f}% ± {:.0f} "
                  "[{:.0f}–{:.0f}%] of the measured bandwidth; from the median step: {} GB/s, {:.0f}% ± {:.0f} "
                  "[{:.0f}–{:.0f}%].",
                  roof.depth, pm(roof.decode_gbs, 1), pm(roof.probe_gbs, 1), 100.0 * roof.fraction.mean,
                  100.0 * roof.fraction.stddev, 100.0 * roof.fraction.min, 100.0 * roof.fraction.max,
                  pm(roof.decode_median_gbs, 1), 100.0 * roof.median_fraction.mean, 100.0 * roof.median_fraction.stddev,
                  100.0 * roof.median_fraction.min, 100.0 * roof.median_fraction.max));
}

// With the KV cache against recomputing the history.
void table_cache(std::string& o, const BenchResults& r) {
  const auto line = [&o](const std::string& s) { o += s + "\n"; };
  if (!r.cache.empty()) {
    line("");
    line("| Context | with KV cache, ms/token | without (recompute), ms/token | speedup |");
    line("|---|---|---|---|");
  }
  for (const CacheFigures& c : r.cache) {
    line(fmt::format("| {} | {} | {} | {:.1f}× ± {:.1f} |", c.context, pm(c.cached_ms, 2), pm(c.uncached_ms, 1),
                     c.speedup.mean, c.speedup.stddev));
  }
}

// The paging simulation's memory against contiguous slots.
void table_paging(std::string& o, const BenchResults& r) {
  const auto line = [&o](const std::string& s) { o += s + "\n"; };
  const PagingMemoryResult& p = r.paging;
  const PagingWorkload& w = r.plan.paging;
  line("");
  line(
      fmt::format("Paging memory: {} sequences of {}–{} tokens (seed {}, {} tokens in all); budget = {} slots of {} "
                  "tokens ({}).",
                  p.num_sequences, w.min_tokens, w.max_tokens, w.seed, p.tokens_held, w.budget_slots, p.slot_tokens,
                  mib(p.budget_bytes)));
  line("");
  line("| KV layout | allocated | waste | sequences in the budget |");
  line("|---|---|---|---|");
  line(fmt::format("| contiguous slots of {} tokens | {} | {:.1f}% | {} |", p.slot_tokens, mib(p.contiguous_bytes),
                   p.contiguous_waste_percent, p.contiguous_fit));
  line(fmt::format("| paged, blocks of {} tokens | {} | {:.1f}% | {} ({:.2f}×) |", p.block_size, mib(p.paged_bytes),
                   p.paged_waste_percent, p.paged_fit, p.fit_ratio));
}

}  // namespace

std::string bench_table(const BenchResults& r, const BenchRunInfo& info) {
  std::string o;
  table_header(o, r, info);
  table_prefill(o, r);
  table_decode(o, r);
  table_cache(o, r);
  table_paging(o, r);
  for (const std::string& note : r.notes) o += "Note: " + note + "\n";
  return o;
}

}  // namespace kvs
