#include "server/tool_request.h"

#include <fmt/format.h>

#include <algorithm>

#include "grammar/json_schema.h"

namespace kvs::server {
namespace {

using ordered_json = nlohmann::ordered_json;

// obj[key] when it is a string, else "" (value() would throw on another type: a 500 instead of a 400).
std::string string_at(const ordered_json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// Every "$ref": "#/..." below `schema` pointed at where the schema now sits in a larger one.
void move_refs(ordered_json& schema, const std::string& prefix) {
  if (schema.is_object()) {
    for (auto& [key, value] : schema.items()) {
      if (key == "$ref" && value.is_string() && value.get<std::string>().starts_with("#")) {
        value = "#" + prefix + value.get<std::string>().substr(1);
      } else {
        move_refs(value, prefix);
      }
    }
  } else if (schema.is_array()) {
    for (ordered_json& item : schema) move_refs(item, prefix);
  }
}

ordered_json parameters_of(const ordered_json& tool) {
  const ordered_json& f = tool["function"];
  return f.contains("parameters") && !f["parameters"].is_null()
             ? f["parameters"]
             : ordered_json{{"type", "object"}, {"properties", ordered_json::object()}};
}

ApiExpected<std::shared_ptr<const JsonSchema>> compile(const ordered_json& schema, const std::string& param) {
  auto compiled = JsonSchema::compile(schema.dump());
  if (!compiled) return ApiError::invalid(param, compiled.status().message());
  return *compiled;
}

}  // namespace

ApiExpected<ToolRequest> parse_tool_request(const ordered_json& tools, const ordered_json& choice, bool parallel) {
  ToolRequest r;
  r.parallel = parallel;
  if (!tools.is_array())
    return ApiError::invalid("tools", fmt::format("'tools' must be an array, got {}", tools.dump()));
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& tool = tools[i];
    const std::string param = fmt::format("tools[{}]", i);
    if (!tool.is_object() || string_at(tool, "type") != "function")
      return ApiError::invalid(param + ".type", fmt::format("'{}.type' must be \"function\"", param));
    if (!tool.contains("function") || !tool["function"].is_object())
      return ApiError::invalid(param + ".function", fmt::format("'{}.function' must be an object", param));
    const ordered_json& f = tool["function"];
    const std::string name = string_at(f, "name");
    if (!valid_name(name)) {
      return ApiError::invalid(param + ".function.name",
                               fmt::format("'{}.function.name' must be 1-64 letters, digits, '_' or '-', got {}", param,
                                           f.contains("name") ? f["name"].dump() : "none"));
    }
    if (std::find(r.names.begin(), r.names.end(), name) != r.names.end())
      return ApiError::invalid(param + ".function.name", fmt::format("the function '{}' is given twice", name));
    if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
      return ApiError::invalid(param + ".function.parameters",
                               fmt::format("'{}.function.parameters' must be a JSON Schema object", param));
    r.names.push_back(name);
  }
  r.tools = tools;
  if (choice.is_null()) {
    r.choice = r.names.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  } else if (choice.is_string()) {
    const std::string c = choice;
    if (c == "none") {
      r.choice = ToolChoice::kNone;
    } else if (c == "auto") {
      r.choice = ToolChoice::kAuto;
    } else if (c == "required") {
      r.choice = ToolChoice::kRequired;
    } else {
      return ApiError::invalid("tool_choice",
                               fmt::format("'tool_choice' must be none, auto, required or a function, got \"{}\"", c));
    }
  } else if (choice.is_object() && string_at(choice, "type") == "function" && choice.contains("function") &&
             choice["function"].is_object() && choice["function"].contains("name")) {
    r.choice = ToolChoice::kNamed;
    r.named = choice["function"]["name"].is_string() ? choice["function"]["name"].get<std::string>() : "";
    if (std::find(r.names.begin(), r.names.end(), r.named) == r.names.end())
      return ApiError::invalid("tool_choice.function.name",
                               fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", r.named));
  } else {
    return ApiError::invalid("tool_choice", fmt::format("'tool_choice' must be none, auto, required or "
                                                        "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, "
                                                        "got {}",
                                                        choice.dump()));
  }
  if ((r.choice == ToolChoice::kRequired || r.choice == ToolChoice::kNamed) && r.names.empty())
    return ApiError::invalid("tool_choice", "'tool_choice' asks for a call but 'tools' is empty");
  if (r.choice == ToolChoice::kNamed) {
    const size_t i = static_cast<size_t>(std::find(r.names.begin(), r.names.end(), r.named) - r.names.begin());
    auto forced = compile(parameters_of(tools[i]), fmt::format("tools[{}].function.parameters", i));
    if (!forced) return forced.error();
    r.forced = *forced;
  } else if (r.choice == ToolChoice::kRequired) {
    ordered_json alternatives = ordered_json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      ordered_json parameters = parameters_of(tools[i]);
      move_refs(parameters, fmt::format("/items/anyOf/{}/properties/parameters", i));
      alternatives.push_back({{"type", "object"},
                              {"properties", {{"name", {{"const", r.names[i]}}}, {"parameters", parameters}}},
                              {"required", {"name", "parameters"}},
                              {"additionalProperties", false}});
    }
    ordered_json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", alternatives}}}};
    if (!parallel) schema["maxItems"] = 1;
    auto forced = compile(schema, "tools");
    if (!forced) return forced.error();
    r.forced = *forced;
  }
  return r;
}

}  // namespace kvs::server
