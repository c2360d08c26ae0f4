// Perplexity under the protocol of ../shared/reference/stories260K/perplexity.json: the text is
// encoded without BOS (with the dummy-prefix space); chunk c covers tokens [c*L, (c+1)*L) and is
// evaluated from an empty cache as BOS + its tokens, scoring each chunk token given the ones
// before it (L predictions per chunk); perplexity = exp(mean NLL over all scored tokens).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "core/kv_dtype.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

struct PerplexityOptions {
  size_t chunk_tokens = 512;          // L
  size_t max_chunks = 0;              // 0 = every full chunk of the text
  KvDTypes kv_dtype = KvDType::kF32;  // element type of the KV cache the chunks are evaluated with
};

struct PerplexityResult {
  size_t text_tokens = 0;
  std::vector<double> chunk_mean_nll;
  double mean_nll = 0.0;
  double perplexity = 0.0;
};

// progress(chunks_done, chunks_total) after each chunk.
Expected<PerplexityResult> evaluate_perplexity(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                               std::string_view text, const PerplexityOptions& options,
                                               const std::function<void(size_t, size_t)>& progress = {});

}  // namespace kvs
