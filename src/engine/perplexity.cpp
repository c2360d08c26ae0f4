#include "engine/perplexity.h"

#include <cmath>

#include "engine/generate.h"

namespace kvs {
namespace {

// -log softmax(logits)[target], in double for a stable sum over thousands of tokens.
double negative_log_likelihood(std::span<const float> logits, TokenId target) {
  double max = logits[0];
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return std::log(sum) + max - static_cast<double>(logits[target]);
}

}  // namespace

Expected<PerplexityResult> evaluate_perplexity(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                               std::string_view text, const PerplexityOptions& options,
                                               const std::function<void(size_t, size_t)>& progress) {
  const size_t L = options.chunk_tokens;
  const size_t context = model.config().context_length;
  if (L < 1 || L > context) {
    return Status::invalid_argument(
        fmt::format("chunk length must be in [1, {}] (the model's context), got {}", context, L));
  }
  if (tokenizer.bos() < 0) return Status::invalid_argument("the model's vocabulary has no BOS token");
  const std::vector<TokenId> tokens = tokenizer.encode(text, /*add_bos=*/false);
  PerplexityResult result;
  result.text_tokens = tokens.size();
  size_t chunks = tokens.size() / L;
  if (options.max_chunks > 0) chunks = std::min(chunks, options.max_chunks);
  if (chunks == 0) {
    return Status::invalid_argument(
        fmt::format("the text has {} tokens, fewer than one chunk of {}", tokens.size(), L));
  }
  // One engine for every chunk: a sequence of L tokens at a time, with logits after each of them, so
  // no prefix cache (a cached BOS would leave its logits row uncomputed).
  EngineConfig config{.max_batch_tokens = 512, .max_seqs = 1, .kv_dtype = options.kv_dtype, .prefix_caching = false};
  config.kv_blocks = kv_blocks_for_tokens(L, config.block_size);
  auto engine = Engine::create(model, tokenizer, pool, config);
  if (!engine) return engine.status();
  double total_nll = 0.0;
  for (size_t c = 0; c < chunks; ++c) {
    const TokenId* chunk = tokens.data() + c * L;
    RequestParams params;
    params.prompt.assign(1, tokenizer.bos());
    params.prompt.insert(params.prompt.end(), chunk, chunk + L - 1);
    params.max_new_tokens = 0;
    params.all_logits = true;
    double chunk_nll = 0.0;
    // The logits after position i predict chunk token i.
    params.on_logits = [&](size_t position, std::span<const float> logits) {
      chunk_nll += negative_log_likelihood(logits, chunk[position]);
    };
    auto done = generate(**engine, std::move(params));
    if (!done) return done.status();
    result.chunk_mean_nll.push_back(chunk_nll / L);
    total_nll += chunk_nll;
    if (progress) progress(c + 1, chunks);
  }
  result.mean_nll = total_nll / static_cast<double>(chunks * L);
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

}  // namespace kvs
