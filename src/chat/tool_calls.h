// Tool calls in a model's output: the tools a chat offers (what the chat template renders, the names the model may
// call, and whether it must: `tool_choice`), and the output read back into OpenAI's `tool_calls`: under a forced choice
// the constrained output (a named function's arguments object, `required`'s JSON array of {"name", "parameters"}),
// under `auto` the formats chat templates teach models (Hermes/Qwen `<tool_call>{...}</tool_call>`, Mistral
// `[TOOL_CALLS][...]`, Llama 3.x's `<|python_tag|>` or bare `{"name": ..., "parameters": ...}`), for functions offered.
// The request's JSON is the server's to validate (server/tool_request.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvs {
class JsonSchema;
}

namespace kvs::chat {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolRequest {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as given: what the chat template renders
  std::vector<std::string> names = {};
  ToolChoice choice = ToolChoice::kAuto;
  std::string named = {};                         // kNamed: the function
  bool parallel = true;                           // parallel_tool_calls
  std::shared_ptr<const JsonSchema> forced = {};  // kRequired, kNamed: what the output must be an instance of
};

// What a finished output says: its text outside any call (none when there is none) and its calls, as OpenAI's
// message.tool_calls ([{id, type: "function", function: {name, arguments: "<JSON text>"}}]).
struct ToolCallOutput {
  std::optional<std::string> content;
  nlohmann::json tool_calls = nlohmann::json::array();
};

// Call ids: "call_" and 24 letters/digits, or 9 letters/digits where the chat template demands it (Mistral's).
class ToolCallIds {
 public:
  ToolCallIds(uint64_t seed, bool nine_characters) : state_(seed), nine_(nine_characters) {}
  std::string next();

 private:
  uint64_t state_;
  bool nine_;
};

ToolCallOutput read_tool_calls(const std::string& text, const ToolRequest& request, ToolCallIds& ids);

// Streaming: the text that may be the start of a call is held back until it is known not to be one; what is
// surely content goes out as it comes. With a forced choice everything is a call (held to the end).
class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolRequest& request) : request_(&request) {}
  // Content to send now (possibly empty).
  std::string push(std::string_view text);
  // At the end: the held-back text read (content still to send, and the calls).
  ToolCallOutput finish(ToolCallIds& ids);

 private:
  const ToolRequest* request_;
  std::string held_;
  bool sent_content_ = false;  // some content went out: a bare JSON call can no longer start the output
};

}  // namespace kvs::chat
