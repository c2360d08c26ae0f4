// The timed sections of `kvserve bench`. Each runs the real engine path (Engine::step, as the
// server and `kvserve run` do) with fixed-seed token ids and times only the work it names. Measurements that are
// compared (paged vs contiguous, cached vs recomputed, decode vs the bandwidth probe) are
// interleaved, because this host's memory bandwidth drifts by tens of percent within an hour.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "bench/bench_plan.h"
#include "bench/bench_progress.h"
#include "bench/bench_results.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/decoder_model.h"

namespace kvs {

// Monotonic seconds; injected so that nothing below the CLI reads a clock of its own choosing.
using BenchClock = std::function<double()>;

struct BenchEnv {
  ThreadPool& pool;
  BenchClock now;
  BenchProgress& progress;
};

// Shape and byte counts of a loaded model.
BenchModelInfo describe_model(const DecoderModel& model, const std::string& path);

// `n` token ids uniform over [3, vocab) (past BOS/EOS/UNK) from `seed`; the same on every platform.
std::vector<TokenId> bench_tokens(size_t n, size_t vocab, uint64_t seed);

// One greedy request on an idle engine: its prompt computed (timed as prefill_seconds, up to its first
// sampled token), then `warm_steps` untimed decode tokens, then `steps` timed ones: each the time from one
// token to the next (one engine step with the cache; with recompute_history, the steps that recompute
// the whole history).
struct TimedRun {
  double prefill_seconds = 0.0;
  std::vector<double> step_seconds;
  size_t kv_bytes_held = 0;  // by the request when it finished (its last token computed)
};
Expected<TimedRun> timed_run(Engine& engine, std::span<const TokenId> prompt, size_t warm_steps, size_t steps,
                             const BenchClock& now, bool recompute_history = false);

// One repetition of decode at `depth`: a prompt of max(depth, 1) tokens (depth - 1 context tokens and
// `first`) computed untimed (which also pages in every weight, so a probe that just ran is not billed to
// the run), then `tokens` timed steps: positions depth .. depth + tokens - 1, as a cache filled to `depth`.
// Its rates: tokens / total time, and 1 / the median step time.
struct DecodeRates {
  double tok_s = 0.0;
  double median_tok_s = 0.0;
  size_t kv_bytes_held = 0;  // at the end, depth + tokens - 1 positions computed
};
Expected<DecodeRates> decode_at_depth(Engine& engine, std::span<const TokenId> context, size_t depth, TokenId first,
                                      size_t tokens, const BenchClock& now);

// An engine for one sequence of up to `capacity` tokens in `layout`, for the benchmark's model.
struct BenchEngine {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Engine> engine;
};
// How a benchmark's KV cache is kept: element types, and a forced window or one pool for all layers.
struct KvVariant {
  KvDTypes dtype = KvDType::kF32;
  size_t window = 0;                  // --kv-window
  bool hybrid = true;                 // false: --no-kv-hybrid
  MlaForm mla_form = MlaForm::kAuto;  // --mla-form
  // "f16", "f16@global" (one pool), "f16@w512" (forced window), "f16@absorbed" / "f16@expanded" (an MLA form)
  std::string name() const;
};
// prefix_caching false: every prompt is computed, never taken from the cache of an earlier repetition. `runs_on`:
// the model the engine runs (a GPU's over `model`), null: `model` itself.
Expected<BenchEngine> bench_engine(const DecoderModel& model, ThreadPool& pool, size_t capacity, KvLayout layout,
                                   const BenchPlan& plan, const KvVariant& kv = {}, bool prefix_caching = true,
                                   const Model* runs_on = nullptr);

// Number of BenchProgress steps a run of `plan` takes (with or without a second prefill model).
size_t bench_step_count(const BenchPlan& plan, bool extra_prefill);

// Prefill tok/s and matmul GFLOP/s for every prompt length, lengths interleaved within each
// repetition. `peak_gflops` turns GFLOP/s into a fraction of peak.
Expected<PrefillSet> measure_prefill(const DecoderModel& model, const BenchModelInfo& info, const BenchPlan& plan,
                                     double peak_gflops, BenchEnv& env);

struct DecodeSection {
  std::vector<DecodeFigures> decode;
  RooflineFigures roofline;
};
// Decode tok/s at every depth, paged and contiguous in A/B B/A order, with bandwidth probes
// between the repetitions at the roofline depth (the smallest). Each repetition yields two rates:
// tokens / total time, and 1 / the median step time (which ignores the host's occasional stalls).
Expected<DecodeSection> measure_decode(const DecoderModel& model, const BenchModelInfo& info, const BenchPlan& plan,
                                       BenchEnv& env);

// Time per generated token with and without the KV cache at each context, A/B per context.
Expected<std::vector<CacheFigures>> measure_cache_vs_recompute(const DecoderModel& model, const BenchPlan& plan,
                                                               BenchEnv& env);

}  // namespace kvs
