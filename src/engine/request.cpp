#include "engine/request.h"

#include <fmt/format.h>

#include "engine/logits_processor.h"

namespace kvs {

Status RequestParams::validate(const EngineCapabilities& caps) const {
  if (prompt.empty()) return Status::invalid_argument("the prompt is empty (0 tokens)");
  if (prompt.size() > caps.context_length && !caps.runs_past_context(*this)) {
    return Status::out_of_range(
        fmt::format("the prompt has {} tokens but the model's context holds {}", prompt.size(), caps.context_length));
  }
  for (TokenId t : prompt) {
    if (t < 0 || static_cast<size_t>(t) >= caps.vocab_size)
      return Status::invalid_argument(fmt::format("token id {} is outside the vocabulary of {}", t, caps.vocab_size));
  }
  KVS_RETURN_IF_ERROR(sampling.validate());
  if (num_samples == 0) return Status::invalid_argument("the number of samples must be at least 1, got 0");
  if (num_samples > 1 && max_new_tokens == 0) {
    return Status::invalid_argument(
        fmt::format("{} samples of a prompt need at least 1 new token each, got 0", num_samples));
  }
  if (caps.key_tails > 0 && num_samples > caps.key_tails) {
    return Status::invalid_argument(fmt::format(
        "{} samples of a prompt need as many key tails for their quantized keys, but there are {} (2 per --max-seqs)",
        num_samples, caps.key_tails));
  }
  FeatureSet features = caps.features;
  features.add(Feature::kKvWindow, kv_window > 0, fmt::format("a KV window ({} tokens)", kv_window))
      .add(Feature::kParallelSamples, num_samples > 1, fmt::format("parallel sampling ({} samples)", num_samples))
      .add(Feature::kNoCacheBaseline, recompute_history)
      .add(Feature::kPerTokenLogits, all_logits || on_logits)
      .add(Feature::kPromptLogprobs, prompt_logprobs.has_value());
  KVS_RETURN_IF_ERROR(check_features(features));
  const KvPolicyParams policy = caps.policy_of(*this);
  if (policy.evicts()) {
    KVS_RETURN_IF_ERROR(policy.validate(caps.context_length).with_field("kv_policy"));
    features.add(Feature::kEvictionPolicy, true, fmt::format("the KV policy {}", policy.describe()));
    KVS_RETURN_IF_ERROR(check_features(features).with_field("kv_policy"));
  }
  return LogitsProcessors::validate(*this);
}

Request::~Request() = default;

Request::Request(SeqId id_, RequestParams params_, const Tokenizer& tokenizer, OutputSink sink_, SteadyTime arrival_)
    : SequenceState(id_, params_.prompt),
      params(std::move(params_)),
      request_id(id_),
      sampler(params.sampling),
      // The continuation follows prompt text, so its first space is real (unless the prompt is only BOS).
      decoder(tokenizer, params.prompt.size() == 1 && params.prompt[0] == tokenizer.bos()),
      stops(params.stop_strings),
      sink(std::move(sink_)),
      arrival(arrival_) {
  all_logits = params.all_logits || params.prompt_logprobs.has_value();
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
    case FinishReason::kContextFull:
    case FinishReason::kKvCacheFull: return "length";
    case FinishReason::kEos:
    case FinishReason::kStopString:
    case FinishReason::kDocumentComplete: return "stop";
    case FinishReason::kAborted: return "abort";
    case FinishReason::kDeviceError: return "error";
  }
  return "unknown";
}

}  // namespace kvs
