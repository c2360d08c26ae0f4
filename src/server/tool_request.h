// OpenAI's tool calling in a request: `tools`, `tool_choice` and `parallel_tool_calls` validated with errors that name
// the field, and the output schema that makes `required` and a named choice certain (the engine's structured-output
// constraint, grammar/json_schema.h, as vLLM's guided decoding does: a named function's output is its arguments
// object, `required`'s a JSON array of {"name", "parameters"}). Reading the output back is chat/tool_calls.h's.
#pragma once

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "server/api_error.h"

namespace kvs::server {

using chat::ToolChoice;
using chat::ToolRequest;

// tools (ordered, as the request lists them), tool_choice (null: auto with tools) and parallel_tool_calls.
ApiExpected<ToolRequest> parse_tool_request(const nlohmann::ordered_json& tools, const nlohmann::ordered_json& choice,
                                            bool parallel);

}  // namespace kvs::server
