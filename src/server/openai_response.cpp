#include "server/openai_response.h"

namespace kvs::server {
namespace {

using nlohmann::json;

bool is_chat(const ResponseMeta& meta) { return meta.endpoint == Endpoint::kChatCompletions; }

json envelope(const ResponseMeta& meta, bool chunk) {
  const char* object = is_chat(meta) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", nullptr}};
}

json finish_value(std::optional<std::string_view> reason) {
  return reason ? json(std::string(*reason)) : json(nullptr);
}

}  // namespace

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json full_response(const ResponseMeta& meta, std::span<const Choice> choices, const Usage& usage) {
  json body = envelope(meta, /*chunk=*/false);
  body["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json choice = {
        {"index", i}, {"finish_reason", std::string(choices[i].finish_reason)}, {"logprobs", choices[i].logprobs}};
    if (is_chat(meta)) {
      const bool calls = choices[i].tool_calls.is_array() && !choices[i].tool_calls.empty();
      choice["message"] = {{"role", "assistant"},
                           {"content", calls && choices[i].text.empty() ? json(nullptr) : json(choices[i].text)}};
      if (calls) choice["message"]["tool_calls"] = choices[i].tool_calls;
    } else {
      choice["text"] = choices[i].text;
    }
    body["choices"].push_back(std::move(choice));
  }
  body["usage"] = usage.to_json();
  return body;
}

json stream_chunk(const ResponseMeta& meta, size_t index, const std::string& text, bool first,
                  std::optional<std::string_view> finish_reason, bool include_usage, const json& logprobs) {
  json body = envelope(meta, /*chunk=*/true);
  json choice = {{"index", index}, {"finish_reason", finish_value(finish_reason)}, {"logprobs", logprobs}};
  if (is_chat(meta)) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && !finish_reason)) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  body["choices"] = json::array({std::move(choice)});
  if (include_usage) body["usage"] = nullptr;
  return body;
}

json tool_calls_chunk(const ResponseMeta& meta, size_t index, const json& calls, bool include_usage) {
  json body = envelope(meta, /*chunk=*/true);
  json deltas = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = calls[i];
    call["index"] = i;
    deltas.push_back(std::move(call));
  }
  body["choices"] = json::array(
      {{{"index", index}, {"delta", {{"tool_calls", deltas}}}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
  if (include_usage) body["usage"] = nullptr;
  return body;
}

json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json body = envelope(meta, /*chunk=*/true);
  body["choices"] = json::array();
  body["usage"] = usage.to_json();
  return body;
}

std::string sse_event(const json& data) {
  return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace kvs::server
