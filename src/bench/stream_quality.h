// The eviction quality table of docs/KV_CACHE.md: the perplexity of one long stream (eval/stream_perplexity.h)
// under each eviction policy at each budget, against the full cache, and the curve of NLL against position
// that shows a plain window's collapse beside the attention sinks' flat line (StreamingLLM's figure) and where
// heavy hitters stand (H2O's comparison).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_svg.h"
#include "eval/perplexity.h"
#include "eval/stream_perplexity.h"

namespace kvs {

struct StreamQualityRun {
  KvPolicyParams policy;  // resolved; full: the cache of the whole context, or a window of kv_window
  size_t kv_window = 0;   // > 0: the baseline of a sliding window at positions in the sequence (--kv-window)
  StreamPerplexityResult result;
  size_t budget() const { return kv_window > 0 ? kv_window : policy.budget; }
};

struct StreamQuality {
  size_t context = 0;            // the model's
  size_t stream_tokens = 0;      // scored
  double full_in_context = 0.0;  // the full cache over the first `context` tokens (one sequence)
  // The full cache over the whole stream, recomputed every context / 2 tokens (evaluate_strided_perplexity):
  // each token sees at least half a context before it.
  StreamPerplexityResult full_strided;
  std::vector<StreamQualityRun> runs;  // the full cache over the first context first
};

// Every policy of `policies` (their budgets ignored) at every budget, on the stream `base` describes, and at
// each budget the sliding window of issue 14 (positions in the sequence, so past the trained ones).
Expected<StreamQuality> measure_stream_quality(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                               std::string_view text, const StreamPerplexityOptions& base,
                                               const std::vector<KvPolicyParams>& policies,
                                               const std::vector<size_t>& budgets);

// "h2o, 4 sinks, 32 recent, pooled": a run's policy without its budget.
std::string stream_quality_label(const StreamQualityRun& run);

// One Markdown table: a row per run (perplexity over the first context of tokens and over the whole stream,
// each against the full cache's, the blocks held and the tokens evicted).
std::string stream_quality_markdown(const StreamQuality& q);

// Mean NLL per `bucket` positions against position, one series per policy at `budget` and the full cache
// (recomputed), named by `label`.
std::vector<PlotPanel> stream_quality_panels(const StreamQuality& q, size_t budget, size_t bucket);

}  // namespace kvs
