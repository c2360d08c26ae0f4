#include "engine/perplexity.h"

#include <cmath>

#include "engine/sequence_runner.h"

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

Expected<PerplexityResult> evaluate_perplexity(const LlamaModel& model, const Tokenizer& tokenizer, ThreadPool& pool,
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
  const size_t vocab = model.config().vocab_size;
  SequenceRunner runner(model, pool, L, /*max_batch_tokens=*/512, {.dtype = options.kv_dtype});
  std::vector<TokenId> input(L);
  double total_nll = 0.0;
  for (size_t c = 0; c < chunks; ++c) {
    const TokenId* chunk = tokens.data() + c * L;
    input[0] = tokenizer.bos();
    std::copy(chunk, chunk + L - 1, input.begin() + 1);
    runner.reset();
    auto appended = runner.append(input, /*all_logits=*/true);
    if (!appended) return appended.status();
    const std::span<const float> logits = *appended;
    double chunk_nll = 0.0;
    for (size_t i = 0; i < L; ++i) chunk_nll += negative_log_likelihood(logits.subspan(i * vocab, vocab), chunk[i]);
    result.chunk_mean_nll.push_back(chunk_nll / L);
    total_nll += chunk_nll;
    if (progress) progress(c + 1, chunks);
  }
  result.mean_nll = total_nll / static_cast<double>(chunks * L);
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

}  // namespace kvs
