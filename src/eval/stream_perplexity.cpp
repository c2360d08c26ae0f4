#include "eval/stream_perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/generate.h"
#include "engine/sampler.h"

namespace kvs {

double StreamPerplexityResult::perplexity_of(size_t begin, size_t end) const {
  end = std::min(end, nll.size());
  if (begin >= end) return 0.0;
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += nll[i];
  return std::exp(sum / static_cast<double>(end - begin));
}

namespace {

// The text's first max_tokens tokens (all when 0), without BOS.
Expected<std::vector<TokenId>> stream_tokens(const Tokenizer& tokenizer, std::string_view text, size_t max_tokens) {
  if (tokenizer.bos() < 0) return Status::invalid_argument("the model's vocabulary has no BOS token");
  std::vector<TokenId> tokens = tokenizer.encode(text, /*add_bos=*/false);
  if (max_tokens > 0) {
    if (tokens.size() < max_tokens) {
      return Status::invalid_argument(
          fmt::format("the text has {} tokens, fewer than the {} asked for", tokens.size(), max_tokens));
    }
    tokens.resize(max_tokens);
  }
  if (tokens.empty()) return Status::invalid_argument("the text has no tokens");
  return tokens;
}

void summarize(StreamPerplexityResult& r) {
  r.perplexity = r.perplexity_of(0, r.nll.size());
  r.mean_nll = std::log(r.perplexity);
}

}  // namespace

Expected<StreamPerplexityResult> evaluate_strided_perplexity(const Model& model, const Tokenizer& tokenizer,
                                                             ThreadPool& pool, std::string_view text,
                                                             const StreamPerplexityOptions& options, size_t window,
                                                             size_t stride) {
  auto tokens = stream_tokens(tokenizer, text, options.max_tokens);
  if (!tokens) return tokens.status();
  if (options.kv.policy.evicts() || window > model.config().context_length || stride == 0 || stride >= window) {
    return Status::invalid_argument(fmt::format(
        "the strided reference needs the full cache, a window within the context of {} and a stride below it "
        "(window {}, stride {})",
        model.config().context_length, window, stride));
  }
  EngineConfig config{.max_batch_tokens = options.chunk_tokens, .max_seqs = 1, .kv = options.kv};
  config.kv.blocks = kv_blocks_for_tokens(window, options.kv.block_size);
  config.kv.prefix_caching = false;
  config.kv.window = 0;  // the full cache
  config.kv.policy = {};
  auto engine = Engine::create(model, tokenizer, pool, config);
  if (!engine) return engine.status();
  StreamPerplexityResult result;
  result.nll.assign(tokens->size(), 0.0);
  for (size_t scored = 0; scored < tokens->size(); scored += stride) {
    const size_t end = std::min(tokens->size(), scored + stride), first = end > window - 1 ? end - (window - 1) : 0;
    RequestParams params;
    params.prompt.assign(1, tokenizer.bos());
    params.prompt.insert(params.prompt.end(), tokens->begin() + static_cast<std::ptrdiff_t>(first),
                         tokens->begin() + static_cast<std::ptrdiff_t>(end - 1));
    params.max_new_tokens = 0;
    params.all_logits = true;
    params.on_logits = [&](size_t position, std::span<const float> logits) {  // predicts token first + position
      if (first + position >= scored)
        result.nll[first + position] = -token_logprob(logits, (*tokens)[first + position]);
    };
    auto done = generate(**engine, std::move(params));
    if (!done) return done.status();
  }
  summarize(result);
  result.kv_blocks_peak = (*engine)->kv().usage().blocks_used_peak;
  return result;
}

Expected<StreamPerplexityResult> evaluate_stream_perplexity(const Model& model, const Tokenizer& tokenizer,
                                                            ThreadPool& pool, std::string_view text,
                                                            const StreamPerplexityOptions& options) {
  auto stream = stream_tokens(tokenizer, text, options.max_tokens);
  if (!stream) return stream.status();
  const std::vector<TokenId>& tokens = *stream;
  const KvOptions& kv = options.kv;
  const KvPolicyParams policy = kv.policy.resolved(kv.block_size);
  // The pool holds what the one sequence can: its budget, or the whole stream (BOS and every token but the last).
  EngineConfig config{.max_batch_tokens = options.chunk_tokens, .max_seqs = 1, .kv = kv};
  config.kv.blocks = policy.evicts() ? kv_blocks_for_tokens(policy.budget, kv.block_size)
                     : kv.window > 0
                         ? kv_max_blocks_per_sequence(kv.block_size, kv.window, tokens.size() + 1, options.chunk_tokens)
                         : kv_blocks_for_tokens(tokens.size(), kv.block_size);
  config.kv.prefix_caching = false;
  config.kv.policy = policy;
  auto engine = Engine::create(model, tokenizer, pool, config);
  if (!engine) return engine.status();
  StreamPerplexityResult result;
  result.nll.assign(tokens.size(), 0.0);
  RequestParams params;
  params.prompt.assign(1, tokenizer.bos());
  params.prompt.insert(params.prompt.end(), tokens.begin(), tokens.end() - 1);
  params.max_new_tokens = 0;
  params.all_logits = true;
  // The logits after position i predict token i.
  params.on_logits = [&](size_t position, std::span<const float> logits) {
    result.nll[position] = -token_logprob(logits, tokens[position]);
  };
  auto done = generate(**engine, std::move(params));
  if (!done) return done.status();
  summarize(result);
  result.kv_blocks_peak = (*engine)->kv().usage().blocks_used_peak;
  result.evicted_tokens = (*engine)->metrics().kv_evicted_tokens_total;
  return result;
}

}  // namespace kvs
