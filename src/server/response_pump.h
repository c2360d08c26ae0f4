// Turns one request's RequestStream into the bytes of its HTTP response body, a little at a time,
// so the transport can notice a client that went away between writes:
//   stream = true:  server-sent events, one OpenAI chunk per engine output, then `data: [DONE]`;
//                   an SSE comment (": keep-alive") after `heartbeat` without output.
//   stream = false: one JSON body at the end; while waiting, a space (JSON allows leading
//                   whitespace) after each `heartbeat` without a write.
// A failed write means the client is gone. Destroying the pump before the request finished
// cancels it, so the engine frees its KV blocks (RAII: no cancel call to forget).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/engine_loop.h"
#include "server/openai_response.h"

namespace kvs::server {

struct PumpOptions {
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  std::string echo_text;                      // completions with echo: the prompt text, sent first
  std::chrono::milliseconds poll{100};        // longest wait for engine output per round
  std::chrono::milliseconds heartbeat{1000};  // longest silence towards the client
};

class ResponsePump {
 public:
  // Writes bytes to the client; false when the connection is gone.
  using ByteSink = std::function<bool(std::string_view bytes)>;
  enum class Progress { kMore, kDone, kClientGone };

  // `on_close(usage)` runs in the destructor: with the request's usage when it finished, or with null,
  // when it must cancel the request in the engine.
  using CloseHook = std::function<void(const Usage* finished_usage)>;
  ResponsePump(std::shared_ptr<RequestStream> stream, CloseHook on_close, ResponseMeta meta, PumpOptions options);
  ~ResponsePump();
  ResponsePump(const ResponsePump&) = delete;
  ResponsePump& operator=(const ResponsePump&) = delete;

  // One round: waits up to options.poll for engine output and writes whatever is due.
  Progress pump(const ByteSink& write);
  bool finished() const { return finished_; }

 private:
  // Appends the body bytes for one engine output to `out` (stream mode) or collects it.
  void on_output(const RequestOutput& output, std::string& out);
  void finish_body(const RequestOutput& last, std::string& out);

  std::shared_ptr<RequestStream> stream_;
  CloseHook on_close_;
  ResponseMeta meta_;
  PumpOptions options_;
  bool started_ = false;
  bool finished_ = false;
  Usage usage_;       // set when finished
  std::string text_;  // stream = false: the whole completion so far
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace kvs::server
