// A naive JSON Schema validator for the keywords structured outputs support (grammar/json_schema.h), written from
// the specification's text and independent of the compiler: type (one or a list), properties, required,
// additionalProperties false, items, minItems/maxItems, enum, const, minLength/maxLength (code points), anyOf, allOf,
// $ref (JSON pointers into the document). The tests check every structured output with it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kvs::test {
namespace schema_validator {

using nlohmann::json;

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xc0) != 0x80;
  return n;
}

inline bool valid(const json& v, const json& schema, const json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    return valid(v, root.at(json::json_pointer(ref.substr(1))), root);
  }
  if (schema.contains("allOf"))
    for (const json& s : schema["allOf"])
      if (!valid(v, s, root)) return false;
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const json& s : schema["anyOf"]) any = any || valid(v, s, root);
    if (!any) return false;
  }
  if (schema.contains("const") && v != schema["const"]) return false;
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), v) == schema["enum"].end())
    return false;
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool typed = false;
    for (const std::string t : types) {
      typed = typed || (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
              (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
              (t == "integer" && v.is_number_integer()) || (t == "boolean" && v.is_boolean()) ||
              (t == "null" && v.is_null());
    }
    if (!typed) return false;
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (n < schema.value("minLength", size_t{0}) || n > schema.value("maxLength", SIZE_MAX)) return false;
  }
  if (v.is_array()) {
    if (v.size() < schema.value("minItems", size_t{0}) || v.size() > schema.value("maxItems", SIZE_MAX)) return false;
    if (schema.contains("items"))
      for (const json& item : v)
        if (!valid(item, schema["items"], root)) return false;
  }
  if (v.is_object()) {
    const json properties = schema.value("properties", json::object());
    for (const std::string name : schema.value("required", json::array()))
      if (!v.contains(name)) return false;
    for (const auto& [name, value] : v.items()) {
      if (properties.contains(name)) {
        if (!valid(value, properties[name], root)) return false;
      } else if (schema.value("additionalProperties", json(true)) == json(false)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace schema_validator

// Whether `value` is an instance of `schema` (the whole document: $refs resolve against it).
inline bool valid_instance(const nlohmann::json& value, const nlohmann::json& schema) {
  return schema_validator::valid(value, schema, schema);
}

}  // namespace kvs::test
