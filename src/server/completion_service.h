// POST /v1/completions and /v1/chat/completions without the transport: body -> validated request
// -> prompt tokens (chat through the model's template) -> EngineLoop::submit -> a ResponsePump that
// produces the response body. Thread-safe: HTTP worker threads share one service.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "engine/engine_loop.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/response_pump.h"
#include "server/served_model.h"
#include "tokenizer/tokenizer.h"

namespace kvs::server {

struct CompletionDefaults {
  size_t completion_max_tokens = 16;  // /v1/completions without max_tokens (OpenAI's default)
  bool log_requests = false;          // one line per finished request on stderr: tokens, prefix-cache hit
  // Chat without max_tokens generates until the context is full (or EOS / a stop).
};

struct StartedResponse {
  std::shared_ptr<ResponsePump> pump;
  bool stream = false;
};

class CompletionService {
 public:
  CompletionService(EngineLoop& loop, const Tokenizer& tokenizer, const ServedModel& model,
                    CompletionDefaults defaults = {});

  ApiExpected<StartedResponse> start(Endpoint endpoint, std::string_view body);
  // POST /apply-template (llama.cpp's): the prompt text a chat completion request's messages make.
  ApiExpected<std::string> apply_template(std::string_view body) const;
  // Responses started and not yet closed (their pumps are alive).
  size_t active_responses() const { return active_; }
  // Waits until no response is open or `limit` passed; true when none is open. For shutdown:
  // after the engine loop stopped, every open response gets its final output and closes.
  bool wait_until_idle(std::chrono::milliseconds limit) const;

 private:
  // The engine's request: prompt tokens (chat through the template), limits, sampling, stops; a 400 when the
  // model's chat template refuses the messages.
  ApiExpected<RequestParams> to_engine_request(const ApiRequest& request, std::string& echo_text);
  uint64_t next_random();  // splitmix64 over a counter seeded at construction

  EngineLoop& loop_;
  const Tokenizer& tokenizer_;
  const ServedModel& model_;
  CompletionDefaults defaults_;
  RequestLimits limits_;
  std::atomic<uint64_t> random_state_;
  std::atomic<size_t> active_{0};
};

}  // namespace kvs::server
