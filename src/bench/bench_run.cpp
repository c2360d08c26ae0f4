#include "bench/bench_run.h"

#include <fmt/format.h>

#include "bench/probe.h"

namespace kvs {

Expected<BenchResults> run_bench(const BenchModels& models, const BenchPlan& plan, BenchEnv& env) {
  KVS_RETURN_IF_ERROR(plan.validate());
  BenchResults r;
  r.plan = plan;
  r.threads = env.pool.num_threads();
  r.isa = std::string(isa_name(best_isa()));
  r.model = describe_model(models.model, models.path);

  // The FMA and int8 peaks before and after the prefill runs they are compared with.
  std::vector<double> peaks, int8_peaks;
  env.progress.step("fp32 FMA and int8 dot peak probes");
  peaks.push_back(measure_peak_gflops(env.pool));
  int8_peaks.push_back(measure_peak_int8_gops(env.pool));
  auto prefill = measure_prefill(models.model, r.model, plan, peaks.front(), env);
  if (!prefill) return prefill.status();
  if (models.prefill_extra) {
    const BenchModelInfo extra = describe_model(*models.prefill_extra, models.prefill_extra_path);
    auto set = measure_prefill(*models.prefill_extra, extra, plan, peaks.front(), env);
    if (!set) return set.status();
    r.prefill_extra = std::move(set).value();
  }
  env.progress.step("fp32 FMA and int8 dot peak probes");
  peaks.push_back(measure_peak_gflops(env.pool));
  int8_peaks.push_back(measure_peak_int8_gops(env.pool));
  r.peak_gflops = summarize(peaks);
  r.peak_int8_gops = summarize(int8_peaks);
  // Fractions of the mean peak, not of the first probe alone.
  r.prefill = std::move(prefill).value();
  for (PrefillSet* set : {&r.prefill, r.prefill_extra ? &*r.prefill_extra : nullptr}) {
    if (!set) continue;
    const double peak = set->int8_peak ? r.peak_int8_gops.mean : r.peak_gflops.mean;
    for (PrefillFigures& f : set->runs) f.peak_fraction = f.gflops.mean / peak;
  }

  auto decode = measure_decode(models.model, r.model, plan, env);
  if (!decode) return decode.status();
  r.decode = std::move(decode->decode);
  r.roofline = decode->roofline;

  if (!plan.cache_contexts.empty()) {
    auto cache = measure_cache_vs_recompute(models.model, plan, env);
    if (!cache) return cache.status();
    r.cache = std::move(cache).value();
  }

  env.progress.step("paging memory simulation");
  const KvCacheSpec spec{.num_layers = r.model.layers, .num_kv_heads = r.model.kv_heads, .head_dim = r.model.head_dim};
  auto paging = simulate_paging_memory(plan.paging, paging_workload_lengths(plan.paging), spec);
  if (!paging) return paging.status();
  r.paging = *paging;
  return r;
}

}  // namespace kvs
