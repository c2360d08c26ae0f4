#include "server/response_pump.h"

#include <utility>

namespace kvs::server {

ResponsePump::ResponsePump(std::shared_ptr<RequestStream> stream, CloseHook on_close, ResponseMeta meta,
                           PumpOptions options)
    : stream_(std::move(stream)),
      on_close_(std::move(on_close)),
      meta_(std::move(meta)),
      options_(std::move(options)),
      last_write_(std::chrono::steady_clock::now()) {}

ResponsePump::~ResponsePump() {
  if (on_close_) on_close_(finished_ ? &usage_ : nullptr);
}

ResponsePump::Progress ResponsePump::pump(const ByteSink& write) {
  if (finished_) return Progress::kDone;
  std::string out;
  if (!started_) {
    started_ = true;
    const bool chat = meta_.endpoint == Endpoint::kChatCompletions;
    if (options_.stream && (chat || !options_.echo_text.empty())) {
      out += sse_event(stream_chunk(meta_, options_.echo_text, /*first=*/true, std::nullopt, options_.include_usage));
    } else if (!options_.stream) {
      text_ = options_.echo_text;
    }
  }
  // Wait for one output, then take whatever else is already there.
  for (auto output = stream_->next(options_.poll); output; output = stream_->next(std::chrono::milliseconds(0))) {
    on_output(*output, out);
    if (finished_) break;
  }
  const auto now = std::chrono::steady_clock::now();
  if (out.empty() && now - last_write_ >= options_.heartbeat) out = options_.stream ? ": keep-alive\n\n" : " ";
  if (!out.empty()) {
    last_write_ = now;
    if (!write(out)) return Progress::kClientGone;
  }
  return finished_ ? Progress::kDone : Progress::kMore;
}

void ResponsePump::on_output(const RequestOutput& output, std::string& out) {
  if (options_.stream) {
    if (!output.text.empty()) {
      out += sse_event(stream_chunk(meta_, output.text, /*first=*/false, std::nullopt, options_.include_usage));
    }
  } else {
    text_ += output.text;
  }
  if (output.finished) {
    finished_ = true;
    finish_body(output, out);
  }
}

void ResponsePump::finish_body(const RequestOutput& last, std::string& out) {
  usage_ = {.prompt_tokens = last.prompt_tokens,
            .completion_tokens = last.completion_tokens,
            .cached_tokens = last.cached_tokens};
  const Usage& usage = usage_;
  if (!last.error.is_ok()) {
    // The status line is long gone (200): the error travels in the body, as OpenAI streams do.
    const nlohmann::json error = api_error_from_status(last.error, "").to_json();
    out += options_.stream ? sse_event(error) + std::string(kSseDone) : error.dump();
    return;
  }
  const std::string_view reason = finish_reason_name(last.finish_reason);
  if (!options_.stream) {
    out += full_response(meta_, text_, reason, usage).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += sse_event(stream_chunk(meta_, "", /*first=*/false, reason, options_.include_usage));
  if (options_.include_usage) out += sse_event(usage_chunk(meta_, usage));
  out += kSseDone;
}

}  // namespace kvs::server
