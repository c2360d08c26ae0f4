// Perplexity of one long stream, as StreamingLLM and H2O measure it: BOS and the first N tokens of a text
// as one sequence (never restarted from an empty cache), each token scored given all before it, through a
// KV cache bounded by an eviction policy (kv/policies/). Without a policy the cache holds the whole stream,
// which must then fit in the model's context; with one, the stream may be any length (positions are assigned
// within the cache). Per-position NLLs give the curve of quality against position (docs/KV_CACHE.md).
#pragma once

#include <string_view>
#include <vector>

#include "core/kv_dtype.h"
#include "core/thread_pool.h"
#include "kv/kv_options.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

struct StreamPerplexityOptions {
  size_t max_tokens = 0;      // tokens of the text scored; 0: all of them
  size_t chunk_tokens = 512;  // the engine's --max-batch-tokens (prefill chunks, up to the budget)
  // The cache: its policy, or a window (> 0: at positions in the sequence, --kv-window) instead, block size, element
  // types and key scales (its pool is sized for the stream, without prefix caching).
  KvOptions kv = {.key_scales = KvScaleAxis::kPerToken};
};

struct StreamPerplexityResult {
  std::vector<double> nll;  // [i]: -log p(token i | BOS, tokens before it)
  double mean_nll = 0.0;
  double perplexity = 0.0;
  size_t kv_blocks_peak = 0;    // the most KV blocks the stream held at once
  uint64_t evicted_tokens = 0;  // what the policy removed
  // exp(mean NLL) of tokens [begin, end).
  double perplexity_of(size_t begin, size_t end) const;
};

Expected<StreamPerplexityResult> evaluate_stream_perplexity(const Model& model, const Tokenizer& tokenizer,
                                                            ThreadPool& pool, std::string_view text,
                                                            const StreamPerplexityOptions& options);

// The full-cache reference over a stream longer than the context (StreamingLLM's "sliding window with
// re-computation", strided as in Hugging Face's perplexity guide): tokens [k * stride, (k + 1) * stride) are
// scored in a sequence of BOS and the `window` - 1 tokens before (k + 1) * stride, computed afresh, so every
// token sees at least window - stride - 1 tokens before it with full attention. Costs window / stride times
// the stream. options.policy must be full; window at most the context.
Expected<StreamPerplexityResult> evaluate_strided_perplexity(const Model& model, const Tokenizer& tokenizer,
                                                             ThreadPool& pool, std::string_view text,
                                                             const StreamPerplexityOptions& options, size_t window,
                                                             size_t stride);

}  // namespace kvs
