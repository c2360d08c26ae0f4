#include "engine/request.h"

#include "engine/logits_processor.h"

namespace kvs {

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
  }
  return "unknown";
}

}  // namespace kvs
