// Turns one request's RequestStream into the bytes of its HTTP response body, a little at a time,
// so the transport can notice a client that went away between writes:
//   stream = true:  server-sent events, one OpenAI chunk per engine output (its choice's index = the
//                   sample's), a chunk with each choice's finish reason as it ends, then `data: [DONE]`;
//                   an SSE comment (": keep-alive") after `heartbeat` without output.
//   stream = false: one JSON body when every sample has finished; while waiting, a space (JSON
//                   allows leading whitespace) after each `heartbeat` without a write. With more
//                   samples than choices (best_of > n), the choices are the samples with the highest
//                   log-probability per generated token (EOS included), best first.
// Usage: the prompt once, the completion tokens of every sample (the discarded ones too, as OpenAI bills).
// With tools (chat), text that may be a call is held back; a finished sample's calls become message.tool_calls
// (stream: one delta per call with its id, name and arguments) and its finish reason "tool_calls".
// A failed write means the client is gone. Destroying the pump before the request finished
// cancels it, so the engine frees its KV blocks (RAII: no cancel call to forget).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_loop.h"
#include "server/logprobs_json.h"
#include "server/openai_response.h"
#include "server/tool_request.h"

namespace kvs::server {

struct PumpOptions {
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  std::string echo_text;                      // completions with echo: the prompt text, sent first
  size_t num_samples = 1;                     // samples the engine generates (best_of)
  size_t num_choices = 1;                     // choices returned (n <= num_samples; < only without stream)
  std::chrono::milliseconds poll{100};        // longest wait for engine output per round
  std::chrono::milliseconds heartbeat{1000};  // longest silence towards the client
  // Logprobs (server/logprobs_json.h): the tokenizer that names tokens, set when the request asked for them; with
  // echo_logprobs the prompt's come first (completions).
  const Tokenizer* logprobs_tokenizer = nullptr;
  size_t prompt_text_bytes = 0;           // completions: text_offset counts from the prompt's start (OpenAI's)
  std::vector<TokenId> echo_prompt = {};  // with echo and logprobs: the prompt's tokens
  // Chat with tools: the output is read back into tool_calls (chat/tool_calls.h), streamed as OpenAI streams them.
  std::shared_ptr<const ToolRequest> tools = {};
  uint64_t tool_call_id_seed = 0;
  bool nine_character_call_ids = false;
};

class ResponsePump {
 public:
  // Writes bytes to the client; false when the connection is gone.
  using ByteSink = std::function<bool(std::string_view bytes)>;
  enum class Progress { kMore, kDone, kClientGone };

  // `on_close(usage)` runs in the destructor: with the request's usage when every sample finished, or
  // with null, when it must cancel the request in the engine.
  using CloseHook = std::function<void(const Usage* finished_usage)>;
  ResponsePump(std::shared_ptr<RequestStream> stream, CloseHook on_close, ResponseMeta meta, PumpOptions options);
  ~ResponsePump();
  ResponsePump(const ResponsePump&) = delete;
  ResponsePump& operator=(const ResponsePump&) = delete;

  // One round: waits up to options.poll for engine output and writes whatever is due.
  Progress pump(const ByteSink& write);
  bool finished() const { return finished_; }

 private:
  struct Sample {
    std::string text;  // stream = false: the whole completion so far
    bool finished = false;
    FinishReason reason = FinishReason::kLength;
    double mean_logprob = 0.0;  // per generated token, when finished
    std::optional<ChoiceLogprobs> logprobs;
    bool echo_scored = false;                         // with echo and logprobs: the prompt's tokens are listed
    std::optional<chat::ToolCallStream> tool_stream;  // with tools
    nlohmann::json tool_calls = nullptr;              // read when finished
  };
  // With tools: the finished sample's held-back text read into calls (stream: their chunks appended to `out`).
  void finish_tool_calls(size_t index, Sample& sample, std::string& out);
  static std::string_view finish_name(const Sample& sample);  // "tool_calls" when it made calls
  // Appends the body bytes for one engine output to `out` (stream mode) or collects it.
  void on_output(const RequestOutput& output, std::string& out);
  void finish_body(std::string& out);
  // The samples returned, best first when there are more samples than choices.
  std::vector<Choice> choices() const;

  std::shared_ptr<RequestStream> stream_;
  CloseHook on_close_;
  ResponseMeta meta_;
  PumpOptions options_;
  bool started_ = false;
  bool finished_ = false;
  Usage usage_;  // complete when every sample has finished
  std::vector<Sample> samples_;
  size_t num_finished_ = 0;
  Status error_;  // an engine error ends the response
  std::optional<chat::ToolCallIds> call_ids_;
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace kvs::server
