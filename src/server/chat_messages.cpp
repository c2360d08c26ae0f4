#include "server/chat_messages.h"

#include <fmt/format.h>

namespace kvs::server {

using nlohmann::json;

namespace {

MaybeError parse_content(const json& v, const std::string& param, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return wrong_type(param, "a string or an array of text parts", v);
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string part_param = fmt::format("{}[{}]", param, i);
    if (!part.is_object() || !part.contains("type")) return wrong_type(part_param, "a content part object", part);
    if (part["type"] != "text") {
      return unsupported(part_param + ".type", fmt::format("{} (only text content parts)", shown(part["type"])));
    }
    std::string text;
    KVS_API_TRY(read_string(part.value("text", json()), part_param + ".text", text));
    out += text;
  }
  return std::nullopt;
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments: "<JSON text>"}}]. The
// arguments go to the chat template as an object when they parse as one (templates write them with tojson).
MaybeError parse_tool_calls(const json& v, const std::string& param, chat::ChatMessage& message) {
  if (!v.is_array()) return wrong_type(param, "an array of tool calls", v);
  message.tool_calls = nlohmann::ordered_json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const json& call = v[i];
    const std::string at = fmt::format("{}[{}]", param, i);
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      return wrong_type(at, "a tool call {id, type, function: {name, arguments}}", call);
    std::string id, name, arguments;
    KVS_API_TRY(read_string(call.value("id", json()), at + ".id", id));
    KVS_API_TRY(read_string(call["function"].value("name", json()), at + ".function.name", name));
    KVS_API_TRY(read_string(call["function"].value("arguments", json()), at + ".function.arguments", arguments));
    const auto parsed = nlohmann::ordered_json::parse(arguments, nullptr, /*allow_exceptions=*/false);
    const nlohmann::ordered_json args = parsed.is_object() ? parsed : nlohmann::ordered_json(arguments);
    message.tool_calls.push_back(
        {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
  }
  return std::nullopt;
}

}  // namespace

MaybeError parse_messages(const json& v, std::vector<chat::ChatMessage>& out) {
  if (!v.is_array()) return wrong_type("messages", "an array of messages", v);
  if (v.empty()) return ApiError::invalid("messages", "'messages' must hold at least one message");
  for (size_t i = 0; i < v.size(); ++i) {
    const json& m = v[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(param, "an object", m);
    chat::ChatMessage message;
    KVS_API_TRY(read_string(m.value("role", json()), param + ".role", message.role));
    if (message.role == "developer") message.role = "system";
    if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool") {
      return ApiError::invalid(param + ".role", fmt::format("'{}.role' must be system, developer, user, assistant or "
                                                            "tool, got \"{}\"",
                                                            param, message.role));
    }
    const bool calls = m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].empty();
    if (calls) {
      if (message.role != "assistant")
        return unsupported(param + ".tool_calls", "(only assistant messages make calls)");
      KVS_API_TRY(parse_tool_calls(m["tool_calls"], param + ".tool_calls", message));
    }
    if (message.role == "tool") {
      KVS_API_TRY(read_string(m.value("tool_call_id", json()), param + ".tool_call_id", message.tool_call_id));
      if (m.contains("name") && m["name"].is_string()) message.name = m["name"].get<std::string>();
    }
    if (calls && m.value("content", json()).is_null()) {
      message.null_content = true;
    } else {
      KVS_API_TRY(parse_content(m.value("content", json()), param + ".content", message.content));
    }
    out.push_back(std::move(message));
  }
  return std::nullopt;
}

}  // namespace kvs::server
