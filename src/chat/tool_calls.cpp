#include "chat/tool_calls.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/splitmix64.h"

namespace kvs::chat {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::array<std::string_view, 3> kMarkers = {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"};

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// One call read from the model's JSON: {"name": ..., "arguments" or "parameters": {...}} naming a requested tool.
std::optional<nlohmann::json> call_from(const ordered_json& v, const ToolRequest& request, ToolCallIds& ids) {
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return std::nullopt;
  const std::string name = v["name"];
  if (std::find(request.names.begin(), request.names.end(), name) == request.names.end()) return std::nullopt;
  const ordered_json* args = v.contains("arguments")    ? &v["arguments"]
                             : v.contains("parameters") ? &v["parameters"]
                                                        : nullptr;
  if (!args) return std::nullopt;
  std::string arguments;
  if (args->is_object()) {
    arguments = args->dump();
  } else if (args->is_string() && ordered_json::accept(args->get<std::string>())) {
    arguments = args->get<std::string>();
  } else {
    return std::nullopt;
  }
  return nlohmann::json{
      {"id", ids.next()}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

// A JSON object (one call) or array (calls); nothing when any item is not a call.
std::optional<nlohmann::json> calls_from(std::string_view text, const ToolRequest& request, ToolCallIds& ids) {
  const auto v = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  nlohmann::json calls = nlohmann::json::array();
  for (const ordered_json& item : v.is_array() ? v : ordered_json::array({v})) {
    auto call = call_from(item, request, ids);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::string> content_of(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty()) return std::nullopt;
  return std::string(t);
}

}  // namespace

std::string ToolCallIds::next() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = nine_ ? "" : "call_";
  for (size_t i = 0; i < (nine_ ? 9u : 24u); ++i) {
    id += kAlphabet[splitmix64(state_) % (sizeof kAlphabet - 1)];
  }
  return id;
}

ToolCallOutput read_tool_calls(const std::string& text, const ToolRequest& request, ToolCallIds& ids) {
  ToolCallOutput out;
  if (request.choice == ToolChoice::kNone) {
    out.content = text;
    return out;
  }
  if (request.choice == ToolChoice::kNamed) {  // the output is the arguments object
    const auto args = ordered_json::parse(text, nullptr, false);
    out.tool_calls.push_back(
        {{"id", ids.next()},
         {"type", "function"},
         {"function", {{"name", request.named}, {"arguments", args.is_discarded() ? text : args.dump()}}}});
    return out;
  }
  // Hermes / Qwen: <tool_call>{...}</tool_call> blocks, text around them.
  if (text.find("<tool_call>") != std::string::npos) {
    std::string content;
    nlohmann::json calls = nlohmann::json::array();
    size_t at = 0;
    while (true) {
      const size_t open = text.find("<tool_call>", at);
      if (open == std::string::npos) {
        content += text.substr(at);
        break;
      }
      content += text.substr(at, open - at);
      const size_t body = open + std::string_view("<tool_call>").size();
      const size_t close = text.find("</tool_call>", body);
      auto found =
          calls_from(text.substr(body, close == std::string::npos ? std::string::npos : close - body), request, ids);
      if (!found) return {.content = text};
      for (auto& call : *found) calls.push_back(std::move(call));
      if (close == std::string::npos) break;
      at = close + std::string_view("</tool_call>").size();
    }
    return {.content = content_of(content), .tool_calls = std::move(calls)};
  }
  // Mistral: [TOOL_CALLS] then a JSON array; Llama 3.x: <|python_tag|> or a bare JSON call; `required`: the array.
  for (std::string_view marker : {std::string_view("[TOOL_CALLS]"), std::string_view("<|python_tag|>")}) {
    const size_t at = text.find(marker);
    if (at == std::string::npos) continue;
    auto found = calls_from(trim(std::string_view(text).substr(at + marker.size())), request, ids);
    if (!found) return {.content = text};
    return {.content = content_of(std::string_view(text).substr(0, at)), .tool_calls = std::move(*found)};
  }
  if (auto found = calls_from(trim(text), request, ids))
    return {.content = std::nullopt, .tool_calls = std::move(*found)};
  out.content = text;
  return out;
}

std::string ToolCallStream::push(std::string_view text) {
  if (request_->choice == ToolChoice::kNone) return std::string(text);
  held_ += text;
  if (request_->choice != ToolChoice::kAuto) return {};
  const std::string_view t = trim(held_);
  if (t.empty()) return {};
  if (!sent_content_ && (t.front() == '{' || t.front() == '[')) return {};  // a bare JSON call may be coming
  // Content up to the first marker (or up to a tail that may be a marker's start) goes now; a marker holds the rest.
  size_t first = std::string::npos;
  for (std::string_view m : kMarkers) first = std::min(first, held_.find(m));
  if (first == 0) return {};
  if (first != std::string::npos) {
    std::string out = held_.substr(0, first);
    held_.erase(0, first);
    sent_content_ = true;
    return out;
  }
  size_t keep = 0;
  for (std::string_view m : kMarkers)
    for (size_t n = std::min(m.size() - 1, held_.size()); n > keep; --n)
      if (std::string_view(held_).substr(held_.size() - n) == m.substr(0, n)) keep = n;
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  sent_content_ = sent_content_ || !out.empty();
  return out;
}

ToolCallOutput ToolCallStream::finish(ToolCallIds& ids) {
  if (held_.empty()) return {};
  if (request_->choice == ToolChoice::kNone) return {.content = std::exchange(held_, {})};
  ToolCallOutput out = read_tool_calls(held_, *request_, ids);
  held_.clear();
  return out;
}

}  // namespace kvs::chat
