// Everything one `kvserve bench` run measured, as plain data: the report (table, JSON) and the
// plot are drawn from this alone.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_paging.h"
#include "bench/bench_plan.h"
#include "bench/bench_stats.h"

namespace kvs {

struct BenchModelInfo {
  std::string path = {};
  std::string weight_type = {};    // of the layer matrices, e.g. "q8_0"
  std::string weight_layout = {};  // "gguf" (rows as in the file) or the packed layout (q8_0x16, q4_0x8, ...)
  size_t layers = 0, dim = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, context = 0;
  size_t matrix_bytes = 0;        // every matrix read per decoded token (DecoderWeights::matrix_bytes)
  size_t layer_params = 0;        // parameters of the layer matrices (multiplied for every token)
  size_t output_params = 0;       // parameters of the classifier (multiplied only for tokens whose logits are wanted)
  size_t kv_bytes_per_token = 0;  // K and V of one position, all layers (f32)
  // Ranks the model is split over (--tp); above 1, matrix_bytes, the params and kv_bytes_per_token are rank 0's
  // shard's: what this process reads and multiplies.
  size_t tensor_parallel = 1;
};

struct PrefillFigures {
  size_t tokens = 0;
  Summary tok_s;
  Summary gflops;              // matmul GFLOP/s: (2 x layer_params x tokens + 2 x output_params) / time
  double peak_fraction = 0.0;  // gflops.mean / the machine's peak for these weights (PrefillSet::int8_peak)
};

struct PrefillSet {
  BenchModelInfo model = {};
  bool int8_peak = false;  // the layer matrices multiply int8 activations: compared with the int8 dot peak
  std::vector<PrefillFigures> runs = {};  // one per prompt length
};

struct DecodeFigures {
  size_t depth = 0;
  size_t tokens = 0;            // decoded per repetition
  Summary paged_tok_s;          // the engine's layout (blocks of plan.paging_block_size): tokens / time
  Summary contiguous_tok_s;     // one block spanning the capacity
  Summary paging_cost_percent;  // per A/B pair: (contiguous tok/s / paged tok/s - 1) x 100
  Summary paged_median_tok_s;   // 1 / the median step time of each repetition
  Summary contiguous_median_tok_s;
  Summary paging_cost_median_percent;  // the same pairs, from the median step times
  double bytes_per_token = 0.0;        // weights + K/V read per decoded token (mean context of the run)
  Summary bandwidth_gbs;               // bytes_per_token x paged tok/s
};

struct RooflineFigures {
  size_t depth = 0;           // decode depth the roofline is taken at (0 unless the plan lacks it)
  Summary probe_gbs;          // every bandwidth probe taken between the decode repetitions
  Summary decode_gbs;         // effective decode bandwidth of each repetition
  Summary fraction;           // each repetition against the mean of the probes before and after it
  Summary decode_median_gbs;  // the same from the median step time
  Summary median_fraction;
};

struct CacheFigures {
  size_t context = 0;
  Summary cached_ms;    // one decode step at this depth, KV cache on
  Summary uncached_ms;  // recomputing all `context` tokens (a fresh runner), what a step costs without a cache
  Summary speedup;      // per repetition: uncached / cached
};

struct BenchResults {
  BenchPlan plan;
  size_t threads = 0;
  std::string isa;
  Summary peak_gflops;     // fp32 FMA probe, before and after the prefill runs
  Summary peak_int8_gops;  // int8 dot-product probe (measure_peak_int8_gops), before and after them
  BenchModelInfo model;
  PrefillSet prefill;                       // on the benchmarked model
  std::optional<PrefillSet> prefill_extra;  // on a second model (default: the BF16 twin), prefill only
  std::vector<DecodeFigures> decode;        // ascending depth
  RooflineFigures roofline;
  std::vector<CacheFigures> cache;  // ascending context
  PagingMemoryResult paging;
  std::vector<std::string> notes;  // plan changes, caveats
};

}  // namespace kvs
