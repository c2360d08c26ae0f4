#include "engine/generator.h"

#include <chrono>
#include <memory>

#include "engine/sequence_runner.h"
#include "engine/stop_matcher.h"

namespace kvs {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status GenerationOptions::validate() const {
  KVS_RETURN_IF_ERROR(sampling.validate());
  if (max_batch_tokens == 0) return Status::invalid_argument("max batch tokens must be positive, got 0");
  return Status::ok();
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
    case FinishReason::kContextFull:
    case FinishReason::kKvCacheFull: return "length";
    case FinishReason::kEos:
    case FinishReason::kStopString: return "stop";
    case FinishReason::kAborted: return "abort";
  }
  return "unknown";
}

Expected<GenerationResult> Generator::generate(std::span<const TokenId> prompt, const GenerationOptions& options,
                                               const TextSink& on_text) {
  KVS_RETURN_IF_ERROR(options.validate());
  const size_t context = model_.config().context_length;
  if (prompt.empty()) return Status::invalid_argument("the prompt is empty (0 tokens)");
  if (prompt.size() > context) {
    return Status::out_of_range(
        fmt::format("the prompt has {} tokens but the model's context holds {}", prompt.size(), context));
  }
  GenerationResult result;
  result.prompt_tokens = prompt.size();
  const size_t capacity = std::min(context, prompt.size() + options.max_new_tokens);
  std::vector<TokenId> history(prompt.begin(), prompt.end());
  Sampler sampler(options.sampling);
  // The continuation follows prompt text, so its first space is real (unless the prompt is only BOS).
  const bool starts_sequence = prompt.size() == 1 && prompt[0] == tokenizer_.bos();
  StreamingDecoder decoder(tokenizer_, starts_sequence);
  StopMatcher stops(options.stop_strings);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };

  // Prefill. Without a cache the runner is rebuilt for every step below.
  auto start = std::chrono::steady_clock::now();
  auto runner = std::make_unique<SequenceRunner>(model_, pool_, options.use_kv_cache ? capacity : prompt.size(),
                                                 options.max_batch_tokens, options.kv);
  std::vector<float> logits;
  {
    auto out = runner->append(prompt);
    if (!out) return out.status();
    logits.assign(out->begin(), out->end());
  }
  result.prefill_seconds = seconds_since(start);
  result.kv_bytes = runner->kv_bytes();

  start = std::chrono::steady_clock::now();
  bool stopped = false;
  for (size_t step = 0; step < options.max_new_tokens && !stopped; ++step) {
    const TokenId token = sampler.sample(logits, history);
    if (options.stop_at_eos && tokenizer_.is_end_of_generation(token)) {
      result.finish_reason = FinishReason::kEos;
      stopped = true;
      break;
    }
    result.tokens.push_back(token);
    history.push_back(token);
    const auto matched = stops.push(decoder.push(token));
    emit(matched.emit);
    if (matched.stopped) {
      result.finish_reason = FinishReason::kStopString;
      stopped = true;
      break;
    }
    if (step + 1 == options.max_new_tokens) break;
    if (history.size() >= context) {
      result.finish_reason = FinishReason::kContextFull;
      break;
    }
    const TokenId next[] = {token};
    Expected<std::span<const float>> out = std::span<const float>();
    if (options.use_kv_cache) {
      out = runner->append(next);
    } else {
      // Baseline: forget everything and recompute the whole history.
      runner = std::make_unique<SequenceRunner>(model_, pool_, history.size(), options.max_batch_tokens, options.kv);
      out = runner->append(history);
      result.kv_bytes = std::max(result.kv_bytes, runner->kv_bytes());
    }
    if (!out && out.status().code() == ErrorCode::kOutOfMemory) {
      result.finish_reason = FinishReason::kKvCacheFull;
      result.kv_message = out.status().message();
      break;
    }
    if (!out) return out.status();
    logits.assign(out->begin(), out->end());
  }
  if (result.finish_reason != FinishReason::kStopString) emit(stops.push(decoder.finish()).emit + stops.finish());
  result.decode_seconds = seconds_since(start);
  result.kv_usage = runner->kv_usage();
  return result;
}

}  // namespace kvs
