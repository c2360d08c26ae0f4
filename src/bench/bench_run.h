// One whole `kvserve bench` run: machine probes, prefill, decode (paged vs contiguous, roofline),
// cache vs recompute and the paging memory simulation, in that order.
#pragma once

#include <string>

#include "bench/bench_measure.h"

namespace kvs {

struct BenchModels {
  const DecoderModel& model;  // everything is measured on this one
  std::string path;
  const DecoderModel* prefill_extra = nullptr;  // optional: prefill measured on it too (e.g. a BF16 twin)
  std::string prefill_extra_path;
};

// `plan` must already fit the model's context (fit_plan_to_context) and validate().
Expected<BenchResults> run_bench(const BenchModels& models, const BenchPlan& plan, BenchEnv& env);

}  // namespace kvs
