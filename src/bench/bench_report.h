// The report of a `kvserve bench` run: a Markdown table (stdout and the README) and the JSON file
// (--json) with every figure, means at the top level and full summaries beside them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_results.h"

namespace kvs {

// How the run was made, for the record; filled in by the CLI.
struct BenchRunInfo {
  std::string date = {};         // ISO 8601, UTC
  std::string command = {};      // the command line that reproduces the run
  std::string load_before = {};  // /proc/loadavg before and after: was the machine idle?
  std::string load_after = {};
  double wall_seconds = 0.0;
};

// Top-level keys (means): prefill_tok_s {"128": ..}, decode_tok_s {"0": ..}, memory_bandwidth_gbs,
// decode_bandwidth_gbs, roofline_fraction, no_cache_speedup {"1024": ..}, peak_gflops,
// prefill_gflops, prefill_peak_fraction, paging_decode_cost_percent, paging_waste_percent,
// contiguous_waste_percent, paging_fit_ratio; full summaries under "details".
nlohmann::json bench_json(const BenchResults& results, const BenchRunInfo& info);

// Markdown: a header, then one table per section.
std::string bench_table(const BenchResults& results, const BenchRunInfo& info);

}  // namespace kvs
