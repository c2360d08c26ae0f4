#include "engine/request.h"

namespace kvs {

Request::Request(SeqId id_, RequestParams params_, const Tokenizer& tokenizer, OutputSink sink_, SteadyTime arrival_)
    : id(id_),
      params(std::move(params_)),
      tokens(params.prompt),
      num_prompt_tokens(params.prompt.size()),
      sampler(params.sampling),
      // The continuation follows prompt text, so its first space is real (unless the prompt is only BOS).
      decoder(tokenizer, params.prompt.size() == 1 && params.prompt[0] == tokenizer.bos()),
      stops(params.stop_strings),
      sink(std::move(sink_)),
      arrival(arrival_) {}

}  // namespace kvs
