#include "server/response_pump.h"

#include <algorithm>
#include <utility>

namespace kvs::server {

ResponsePump::ResponsePump(std::shared_ptr<RequestStream> stream, CloseHook on_close, ResponseMeta meta,
                           PumpOptions options)
    : stream_(std::move(stream)),
      on_close_(std::move(on_close)),
      meta_(std::move(meta)),
      options_(std::move(options)),
      samples_(options_.num_samples),
      last_write_(std::chrono::steady_clock::now()) {
  if (options_.logprobs_tokenizer) {
    for (Sample& s : samples_)
      s.logprobs.emplace(*options_.logprobs_tokenizer, meta_.endpoint, options_.prompt_text_bytes);
  }
  if (options_.tools) {
    for (Sample& s : samples_) s.tool_stream.emplace(*options_.tools);
    call_ids_.emplace(options_.tool_call_id_seed, options_.nine_character_call_ids);
  }
  KVS_ASSERT(options_.num_choices >= 1 && options_.num_choices <= options_.num_samples &&
                 (!options_.stream || options_.num_choices == options_.num_samples),
             "{} choices of {} samples (stream {})", options_.num_choices, options_.num_samples, options_.stream);
}

ResponsePump::~ResponsePump() {
  if (on_close_) on_close_(num_finished_ == samples_.size() ? &usage_ : nullptr);
}

ResponsePump::Progress ResponsePump::pump(const ByteSink& write) {
  if (finished_) return Progress::kDone;
  std::string out;
  if (!started_) {
    started_ = true;
    const bool chat = meta_.endpoint == Endpoint::kChatCompletions;
    // Completions streaming an echo with logprobs: the echo waits for its tokens' logprobs (one chunk, as OpenAI's).
    const bool echo_waits = options_.stream && !options_.echo_prompt.empty();
    for (size_t i = 0; i < samples_.size(); ++i) {
      if (options_.stream && !echo_waits && (chat || !options_.echo_text.empty())) {
        out +=
            sse_event(stream_chunk(meta_, i, options_.echo_text, /*first=*/true, std::nullopt, options_.include_usage));
      } else if (!options_.stream) {
        samples_[i].text = options_.echo_text;
      }
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
  KVS_ASSERT(output.sample < samples_.size(), "output of sample {} of {}", output.sample, samples_.size());
  if (!output.error.is_ok()) {
    error_ = output.error;
    finished_ = true;
    finish_body(out);
    return;
  }
  Sample& sample = samples_[output.sample];
  nlohmann::json logprobs = nullptr;  // of this output's tokens
  if (sample.logprobs) {
    if (!options_.echo_prompt.empty() && !sample.echo_scored) {  // the first output brings the prompt's logprobs
      sample.echo_scored = true;
      sample.logprobs->add_prompt(options_.echo_prompt, output.prompt_logprobs);
      if (options_.stream) {  // the echoed text with its tokens' logprobs
        out += sse_event(stream_chunk(meta_, output.sample, options_.echo_text, /*first=*/true, std::nullopt,
                                      options_.include_usage, sample.logprobs->all()));
      }
    }
    if (!output.logprobs.empty()) logprobs = sample.logprobs->add(output.logprobs);
  }
  const std::string text = sample.tool_stream ? sample.tool_stream->push(output.text) : output.text;
  if (options_.stream) {
    if (!text.empty() || !logprobs.is_null()) {
      out += sse_event(
          stream_chunk(meta_, output.sample, text, /*first=*/false, std::nullopt, options_.include_usage, logprobs));
    }
  } else {
    sample.text += text;
  }
  if (!output.finished || sample.finished) return;
  sample.finished = true;
  sample.reason = output.finish_reason;
  if (sample.tool_stream) finish_tool_calls(output.sample, sample, out);
  const size_t drawn = output.completion_tokens + (output.finish_reason == FinishReason::kEos ? 1 : 0);
  sample.mean_logprob = drawn == 0 ? 0.0 : output.cumulative_logprob / static_cast<double>(drawn);
  usage_.completion_tokens += output.completion_tokens;
  usage_.prompt_tokens = output.prompt_tokens;
  if (output.sample == 0) usage_.cached_tokens = output.cached_tokens;
  if (options_.stream) {
    out +=
        sse_event(stream_chunk(meta_, output.sample, "", /*first=*/false, finish_name(sample), options_.include_usage));
  }
  if (++num_finished_ == samples_.size()) {
    finished_ = true;
    finish_body(out);
  }
}

void ResponsePump::finish_tool_calls(size_t index, Sample& sample, std::string& out) {
  chat::ToolCallOutput read = sample.tool_stream->finish(*call_ids_);
  if (read.content) {
    if (options_.stream) {
      out +=
          sse_event(stream_chunk(meta_, index, *read.content, /*first=*/false, std::nullopt, options_.include_usage));
    } else {
      sample.text += *read.content;
    }
  }
  if (read.tool_calls.empty()) return;
  sample.tool_calls = std::move(read.tool_calls);
  if (options_.stream) out += sse_event(tool_calls_chunk(meta_, index, sample.tool_calls, options_.include_usage));
}

std::string_view ResponsePump::finish_name(const Sample& sample) {
  return sample.tool_calls.is_array() ? "tool_calls" : finish_reason_name(sample.reason);
}

std::vector<Choice> ResponsePump::choices() const {
  std::vector<size_t> order(samples_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (options_.num_choices < samples_.size()) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return samples_[a].mean_logprob > samples_[b].mean_logprob; });
  }
  std::vector<Choice> out;
  for (size_t i = 0; i < options_.num_choices; ++i) {
    const Sample& s = samples_[order[i]];
    out.push_back({.text = s.text,
                   .finish_reason = finish_name(s),
                   .logprobs = s.logprobs ? s.logprobs->all() : nlohmann::json(nullptr),
                   .tool_calls = s.tool_calls});
  }
  return out;
}

void ResponsePump::finish_body(std::string& out) {
  if (!error_.is_ok()) {
    // The status line is long gone (200): the error travels in the body, as OpenAI streams do.
    const nlohmann::json error = api_error_from_status(error_, "").to_json();
    out += options_.stream ? sse_event(error) + std::string(kSseDone) : error.dump();
    return;
  }
  if (!options_.stream) {
    out += full_response(meta_, choices(), usage_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  if (options_.include_usage) out += sse_event(usage_chunk(meta_, usage_));
  out += kSseDone;
}

}  // namespace kvs::server
