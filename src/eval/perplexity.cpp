#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/generate.h"
#include "engine/sampler.h"

namespace kvs {
namespace {

// log softmax(logits), in double.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  const double shift = log_sum_exp(logits);
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - shift;
}

// KL(P || Q) from log-probabilities.
double kl_divergence(const std::vector<double>& log_p, const std::vector<double>& log_q) {
  double kl = 0.0;
  for (size_t i = 0; i < log_p.size(); ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
  return std::max(kl, 0.0);
}

// One chunk (BOS + its first L - 1 tokens) through `engine`: `on_row(position, logits)` for every row.
Status run_chunk(Engine& engine, TokenId bos, std::span<const TokenId> chunk, const LogitsSink& on_row) {
  RequestParams params;
  params.prompt.assign(1, bos);
  params.prompt.insert(params.prompt.end(), chunk.begin(), chunk.end() - 1);
  params.max_new_tokens = 0;
  params.all_logits = true;
  params.on_logits = on_row;
  auto done = generate(engine, std::move(params));
  return done ? Status::ok() : done.status();
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
  EngineConfig config{.max_batch_tokens = 512, .max_seqs = 1, .kv = options.kv, .mla_form = options.mla_form};
  config.kv.prefix_caching = false;
  config.kv.memory_bytes = 0;
  config.kv.blocks = kv_blocks_for_tokens(L, config.kv.block_size);
  auto engine = Engine::create(model, tokenizer, pool, config);
  if (!engine) return engine.status();
  std::unique_ptr<Engine> reference;
  if (options.compare_with_f32) {
    EngineConfig f32 = config;
    f32.kv.dtype = KvDType::kF32;
    f32.kv.rotate_keys = false;
    auto e = Engine::create(model, tokenizer, pool, f32);
    if (!e) return e.status();
    reference = std::move(e).value();
  }
  const size_t vocab = model.config().vocab_size;
  std::vector<float> reference_logits;  // [L][vocab] of the chunk under the f32 cache
  std::vector<double> log_p, log_q;
  KvDivergence divergence;
  double total_nll = 0.0, reference_nll = 0.0;
  size_t agree = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const std::span<const TokenId> chunk(tokens.data() + c * L, L);
    if (reference) {
      reference_logits.resize(L * vocab);
      KVS_RETURN_IF_ERROR(run_chunk(*reference, tokenizer.bos(), chunk, [&](size_t position, std::span<const float> l) {
        std::copy(l.begin(), l.end(), reference_logits.begin() + static_cast<std::ptrdiff_t>(position * vocab));
        reference_nll += -token_logprob(l, chunk[position]);
      }));
    }
    double chunk_nll = 0.0;
    // The logits after position i predict chunk token i.
    KVS_RETURN_IF_ERROR(run_chunk(**engine, tokenizer.bos(), chunk, [&](size_t position, std::span<const float> l) {
      chunk_nll += -token_logprob(l, chunk[position]);
      if (!reference) return;
      const std::span<const float> ref(reference_logits.data() + position * vocab, vocab);
      log_softmax(ref, log_p);
      log_softmax(l, log_q);
      const double kl = kl_divergence(log_p, log_q);
      divergence.mean_kld += kl;
      divergence.max_kld = std::max(divergence.max_kld, kl);
      agree += argmax(ref) == argmax(l);
    }));
    result.chunk_mean_nll.push_back(chunk_nll / static_cast<double>(L));
    total_nll += chunk_nll;
    if (progress) progress(c + 1, chunks);
  }
  const double scored = static_cast<double>(chunks * L);
  if (reference) {
    divergence.mean_kld /= scored;
    divergence.top1_agreement = static_cast<double>(agree) / scored;
    divergence.f32_perplexity = std::exp(reference_nll / scored);
    result.divergence = divergence;
  }
  result.mean_nll = total_nll / scored;
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

}  // namespace kvs
