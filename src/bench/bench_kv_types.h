// `kvserve bench --kv-types`: decode speed at several depths for each way of keeping the KV cache on one
// model (element types; a forced window; one pool for all layers instead of the hybrid layout of a
// sliding-window model), interleaved within every repetition (A B C, then C B A: a drift of the host's
// bandwidth reaches all alike), with each one's bytes per token, the bytes a sequence holds at each depth,
// and how many sequences of a given length fit a memory budget. The first is the baseline the others'
// speed is a ratio of.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_measure.h"
#include "bench/bench_svg.h"

namespace kvs {

struct KvTypesPlan {
  std::vector<KvVariant> types = {{.dtype = KvDType::kF16}, {.dtype = KvDType::kInt8}, {.dtype = KvDType::kInt4}};
  std::vector<size_t> depths = {0, 1024, 4096};
  size_t decode_tokens = 64;
  size_t reps = 3;
  size_t budget_bytes = size_t{1} << 30;  // how many sequences of budget_tokens fit in this
  size_t budget_tokens = 4096;
  size_t block_size = 16;
  size_t max_batch_tokens = 512;
  uint64_t seed = 1234;

  Status validate() const;
};

struct KvTypeFigures {
  KvVariant type = {};
  double bytes_per_token = 0.0;         // K/V of one position, all layers, scales included
  size_t seqs_in_budget = 0;            // sequences of plan.budget_tokens in plan.budget_bytes
  std::vector<Summary> tok_s = {};      // [depth]: tokens / time of each repetition
  std::vector<Summary> speedup = {};    // [depth]: per repetition, tok/s over the first type's in the same repetition
  std::vector<size_t> bytes_held = {};  // [depth]: by the sequence at its end (depth + decode tokens - 1 positions)
};

// `runs_on`: the model the engines run (a GPU's over `model`), null: `model` itself.
Expected<std::vector<KvTypeFigures>> measure_kv_types(const DecoderModel& model, const KvTypesPlan& plan, BenchEnv& env,
                                                      const Model* runs_on = nullptr);

std::string kv_types_table(const KvTypesPlan& plan, const std::vector<KvTypeFigures>& figures);
nlohmann::json kv_types_json(const KvTypesPlan& plan, const std::vector<KvTypeFigures>& figures);
// Two charts: KV bytes a sequence holds vs its length, and decode tok/s vs depth, one line per type.
std::vector<PlotPanel> kv_types_panels(const KvTypesPlan& plan, const std::vector<KvTypeFigures>& figures);

}  // namespace kvs
