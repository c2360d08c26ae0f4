// Perplexity under the protocol of ../shared/reference/stories260K/perplexity.json: the text is
// encoded without BOS (with the dummy-prefix space); chunk c covers tokens [c*L, (c+1)*L) and is
// evaluated from an empty cache as BOS + its tokens, scoring each chunk token given the ones
// before it (L predictions per chunk); perplexity = exp(mean NLL over all scored tokens).
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "core/kv_dtype.h"
#include "core/thread_pool.h"
#include "kv/kv_options.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

struct PerplexityOptions {
  size_t chunk_tokens = 512;  // L
  size_t max_chunks = 0;      // 0 = every full chunk of the text
  // The KV cache the chunks are evaluated with: element types, key scales and rotation, a forced window (0: the
  // model's own), pools (its pool size, prefix caching and policy are the evaluation's: one chunk at a time, no
  // policy).
  KvOptions kv = {};
  MlaForm mla_form = MlaForm::kAuto;  // how an MLA model attends (model.h)
  // Also evaluate each chunk with an f32 KV cache and compare the two distributions at every scored
  // token (what a cache's precision costs, beyond the perplexity: KL divergence and top-1 agreement).
  bool compare_with_f32 = false;
};

// The distributions of the evaluated cache against those of an f32 cache, over every scored token.
struct KvDivergence {
  double mean_kld = 0.0;        // mean KL(P_f32 || P), nats
  double max_kld = 0.0;         // the largest at one token
  double top1_agreement = 0.0;  // share of tokens whose most likely next token is the same
  double f32_perplexity = 0.0;  // the perplexity with the f32 cache
};

struct PerplexityResult {
  size_t text_tokens = 0;
  std::vector<double> chunk_mean_nll;
  double mean_nll = 0.0;
  double perplexity = 0.0;
  std::optional<KvDivergence> divergence = {};  // with compare_with_f32
};

// progress(chunks_done, chunks_total) after each chunk.
Expected<PerplexityResult> evaluate_perplexity(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                               std::string_view text, const PerplexityOptions& options,
                                               const std::function<void(size_t, size_t)>& progress = {});

}  // namespace kvs
