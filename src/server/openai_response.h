// Response bodies in OpenAI's shapes: whole responses (text_completion, chat.completion), the
// chunks of a stream (text_completion chunks, chat.completion.chunk) and server-sent-event framing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/openai_request.h"

namespace kvs::server {

struct Usage {
  size_t prompt_tokens = 0;
  size_t completion_tokens = 0;
  size_t cached_tokens = 0;  // prompt_tokens_details.cached_tokens: prompt tokens from the prefix cache
  nlohmann::json to_json() const;
};

// What every body of one request repeats.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

struct Choice {
  std::string text;
  std::string_view finish_reason;
  nlohmann::json logprobs = nullptr;    // server/logprobs_json.h's object, or null
  nlohmann::json tool_calls = nullptr;  // chat: message.tool_calls (then an empty text is a null content), or null
};

// The whole response; choice i gets index i.
nlohmann::json full_response(const ResponseMeta& meta, std::span<const Choice> choices, const Usage& usage);
// One streamed chunk of choice `index`: `text` as the choice's text (completions) or delta content (chat);
// `first` adds the chat delta's role; finish_reason null unless given; usage null when
// stream_options.include_usage asked for usage (it comes in its own last chunk), absent otherwise; logprobs those of
// the chunk's tokens (or null).
nlohmann::json stream_chunk(const ResponseMeta& meta, size_t index, const std::string& text, bool first,
                            std::optional<std::string_view> finish_reason, bool include_usage,
                            const nlohmann::json& logprobs = nullptr);
// A chat chunk whose delta holds `calls` (message.tool_calls' items) as OpenAI streams them: each with its index,
// id, type, and function name and arguments.
nlohmann::json tool_calls_chunk(const ResponseMeta& meta, size_t index, const nlohmann::json& calls,
                                bool include_usage);
// The final chunk of stream_options.include_usage: no choices, only usage.
nlohmann::json usage_chunk(const ResponseMeta& meta, const Usage& usage);

// "data: <json>\n\n"
std::string sse_event(const nlohmann::json& data);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace kvs::server
