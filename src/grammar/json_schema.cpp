#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace kvs {
namespace {

using json = nlohmann::ordered_json;  // the properties are written in the schema's order

JsonSchema::Node node_of(JsonSchema::Kind kind) {
  JsonSchema::Node node;
  node.kind = kind;
  return node;
}

JsonSchema::Node literal_node(uint32_t trie) {
  JsonSchema::Node node = node_of(JsonSchema::Kind::kLiterals);
  node.literal_trie = trie;
  return node;
}

size_t saturated_add(size_t a, size_t b) { return std::min(a + b, JsonSchema::kUnbounded); }

// Keywords that say nothing about which instances are valid.
const std::set<std::string, std::less<>> kAnnotations = {
    "title",       "description",         "default",  "examples",  "$schema", "$id",
    "$comment",    "deprecated",          "readOnly", "writeOnly", "strict",  "$defs",
    "definitions", "additionalProperties"};  // the machine writes no other keys, so additionalProperties holds
const std::set<std::string, std::less<>> kSupported = {"type",     "properties", "required", "items",     "minItems",
                                                       "maxItems", "enum",       "const",    "minLength", "maxLength",
                                                       "anyOf",    "allOf",      "$ref"};

}  // namespace

int64_t JsonSchema::TrieNode::child(uint8_t c) const {
  for (const auto& [byte, node] : children)
    if (byte == c) return node;
  return -1;
}

size_t JsonSchema::rest_of_object(const Node& object, size_t next, bool first) const {
  size_t tail = object.required_tail[next];
  if (first && tail > 0 && tail < kUnbounded) --tail;  // no comma before the first property
  return saturated_add(tail, 1);                       // and '}'
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json& document, JsonSchema& out) : document_(document), out_(out) {}

  Expected<uint32_t> compile(const json& schema, const std::string& pointer) {
    if (++depth_ > kMaxRefDepth) return error(pointer, "nests or refers deeper than 256 levels");
    Expected<uint32_t> node = compile_schema(schema, pointer);
    --depth_;
    return node;
  }

  Status finish() {
    compute_shortest();
    if (out_.nodes_[out_.root_].shortest >= JsonSchema::kUnbounded)
      return Status::invalid_argument(
          "the schema has no finite instance (a required property or minItems refers back to its own schema)");
    if (out_.nodes_.size() > UINT16_MAX || out_.trie_.size() > UINT32_MAX / 2)
      return Status::invalid_argument(fmt::format("the schema is too large ({} nodes)", out_.nodes_.size()));
    return Status::ok();
  }

 private:
  static constexpr int kMaxRefDepth = 256;

  static Status error(const std::string& pointer, const std::string& what) {
    return Status::invalid_argument(fmt::format("schema at '{}': {}", pointer.empty() ? "#" : "#" + pointer, what));
  }

  uint32_t add_node(JsonSchema::Node node) {
    out_.nodes_.push_back(std::move(node));
    return static_cast<uint32_t>(out_.nodes_.size() - 1);
  }

  uint32_t new_trie() {
    out_.trie_.emplace_back();
    return static_cast<uint32_t>(out_.trie_.size() - 1);
  }

  // Adds `bytes` below `root`; the leaf gets `property` (key tries: each node passed records it in `below`).
  void add_to_trie(uint32_t root, const std::string& bytes, int property) {
    uint32_t at = root;
    for (char ch : bytes) {
      if (property >= 0) out_.trie_[at].below |= uint64_t{1} << property;
      const auto c = static_cast<uint8_t>(ch);
      int64_t next = out_.trie_[at].child(c);
      if (next < 0) {
        const uint32_t made = new_trie();
        out_.trie_[made].depth = out_.trie_[at].depth + 1;
        out_.trie_[at].children.emplace_back(c, made);
        next = made;
      }
      at = static_cast<uint32_t>(next);
    }
    if (property >= 0) out_.trie_[at].below |= uint64_t{1} << property;
    out_.trie_[at].leaf = true;
    out_.trie_[at].property = property >= 0 ? static_cast<uint32_t>(property) : 0;
  }

  Expected<uint32_t> resolve_ref(const json& ref, const std::string& pointer) {
    if (!ref.is_string()) return error(pointer, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#')
      return error(pointer, fmt::format("'$ref' {} is not in this document (only '#...' references are)", ref.dump()));
    const std::string path = target.substr(1);
    if (auto known = by_pointer_.find(path); known != by_pointer_.end()) return known->second;
    json::json_pointer json_pointer;
    try {
      json_pointer = json::json_pointer(path);
    } catch (const json::exception&) {
      return error(pointer, fmt::format("'$ref' {} is not a JSON pointer", ref.dump()));
    }
    const json* target_schema = nullptr;
    try {
      if (document_.contains(json_pointer)) target_schema = &document_.at(json_pointer);
    } catch (const json::exception&) {  // e.g. a non-number step into an array
    }
    if (!target_schema) return error(pointer, fmt::format("'$ref' {} names nothing in the schema", ref.dump()));
    return compile(*target_schema, path);
  }

  Expected<uint32_t> compile_schema(const json& schema, const std::string& pointer) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) return error(pointer, "the schema false has no instance");
      return add_node(node_of(JsonSchema::Kind::kAny));
    }
    if (!schema.is_object()) return error(pointer, fmt::format("a schema is an object, got {}", schema.dump()));
    for (const auto& [key, value] : schema.items()) {
      if (kAnnotations.contains(key) || kSupported.contains(key)) continue;
      return error(pointer, fmt::format("'{}' is not supported (supported: type, properties, required, items, "
                                        "minItems, maxItems, enum, const, minLength, maxLength, anyOf, $ref)",
                                        key));
    }
    const auto constraining = [&](std::string_view except) {
      for (const auto& [key, value] : schema.items())
        if (kSupported.contains(key) && key != except) return key;
      return std::string();
    };
    if (schema.contains("$ref")) {
      if (std::string other = constraining("$ref"); !other.empty())
        return error(pointer, fmt::format("'$ref' beside '{}' is not supported", other));
      return resolve_ref(schema["$ref"], pointer);
    }
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1 || !constraining("allOf").empty())
        return error(pointer, "'allOf' is supported with one schema and nothing beside it");
      return compile(all[0], pointer + "/allOf/0");
    }
    // anyOf beside other constraints means both: not written (the alternatives alone would be followed).
    if (schema.contains("anyOf")) {
      if (std::string other = constraining("anyOf"); !other.empty())
        return error(pointer,
                     fmt::format("'anyOf' beside '{}' is not supported (move it into the alternatives)", other));
    }
    // A node reached by a $ref may be compiled before it is finished (recursion): its index is reserved first.
    const uint32_t index = add_node(node_of(JsonSchema::Kind::kAny));
    by_pointer_.emplace(pointer, index);
    Expected<JsonSchema::Node> node = build(schema, pointer);
    if (!node) return node.status();
    out_.nodes_[index] = std::move(*node);
    return index;
  }

  Expected<JsonSchema::Node> build(const json& schema, const std::string& pointer) {
    if (schema.contains("anyOf")) {
      const json& any = schema["anyOf"];
      if (!any.is_array() || any.empty()) return error(pointer, "'anyOf' must be a non-empty array of schemas");
      JsonSchema::Node node = node_of(JsonSchema::Kind::kAnyOf);
      for (size_t i = 0; i < any.size(); ++i) {
        Expected<uint32_t> alternative = compile(any[i], fmt::format("{}/anyOf/{}", pointer, i));
        if (!alternative) return alternative.status();
        node.alternatives.push_back(*alternative);
      }
      return node;
    }
    if (schema.contains("enum") || schema.contains("const")) {
      std::vector<std::string> texts;
      if (schema.contains("const")) {
        texts.push_back(schema["const"].dump());
      } else {
        if (!schema["enum"].is_array() || schema["enum"].empty())
          return error(pointer, "'enum' must be a non-empty array");
        for (const json& v : schema["enum"]) texts.push_back(v.dump());
      }
      return literal_node(literal_trie(texts));
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty() &&
                 std::all_of(type.begin(), type.end(), [](const json& t) { return t.is_string(); })) {
        for (const json& t : type) types.push_back(t.get<std::string>());
      } else {
        return error(pointer, fmt::format("'type' must be a type name or a list of them, got {}", type.dump()));
      }
    } else if (schema.contains("properties") || schema.contains("required")) {
      types.push_back("object");
    } else if (schema.contains("items")) {
      types.push_back("array");
    } else {
      return node_of(JsonSchema::Kind::kAny);
    }
    if (types.size() == 1) return typed(schema, types[0], pointer);
    JsonSchema::Node node = node_of(JsonSchema::Kind::kAnyOf);
    for (const std::string& type : types) {
      Expected<JsonSchema::Node> one = typed(schema, type, pointer);
      if (!one) return one.status();
      node.alternatives.push_back(add_node(std::move(*one)));
    }
    return node;
  }

  uint32_t literal_trie(const std::vector<std::string>& texts) {
    const uint32_t root = new_trie();
    for (const std::string& t : texts) add_to_trie(root, t, -1);
    return root;
  }

  Expected<uint32_t> count(const json& schema, const char* keyword, const std::string& pointer, uint32_t absent) {
    if (!schema.contains(keyword)) return absent;
    const json& v = schema[keyword];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX - 1)
      return error(pointer, fmt::format("'{}' must be a non-negative integer, got {}", keyword, v.dump()));
    return static_cast<uint32_t>(v.get<uint64_t>());
  }

  Expected<JsonSchema::Node> typed(const json& schema, const std::string& type, const std::string& pointer) {
    using Kind = JsonSchema::Kind;
    if (type == "string") {
      Expected<uint32_t> min = count(schema, "minLength", pointer, 0);
      Expected<uint32_t> max = count(schema, "maxLength", pointer, JsonSchema::kNoLimit);
      if (!min) return min.status();
      if (!max) return max.status();
      if (*min > *max) return error(pointer, fmt::format("minLength {} is over maxLength {}", *min, *max));
      JsonSchema::Node node = node_of(Kind::kString);
      node.min_length = *min;
      node.max_length = *max;
      return node;
    }
    if (type == "number") return node_of(Kind::kNumber);
    if (type == "integer") return node_of(Kind::kInteger);
    if (type == "boolean") return literal_node(literal_trie({"true", "false"}));
    if (type == "null") return literal_node(literal_trie({"null"}));
    if (type == "array") {
      Expected<uint32_t> min = count(schema, "minItems", pointer, 0);
      Expected<uint32_t> max = count(schema, "maxItems", pointer, JsonSchema::kNoLimit);
      if (!min) return min.status();
      if (!max) return max.status();
      if (*min > *max) return error(pointer, fmt::format("minItems {} is over maxItems {}", *min, *max));
      Expected<uint32_t> items = schema.contains("items") ? compile(schema["items"], pointer + "/items")
                                                          : Expected<uint32_t>(add_node(node_of(Kind::kAny)));
      if (!items) return items.status();
      JsonSchema::Node node = node_of(Kind::kArray);
      node.items = *items;
      node.min_items = *min;
      node.max_items = *max;
      return node;
    }
    if (type == "object") return object(schema, pointer);
    return error(pointer,
                 fmt::format("unknown type \"{}\" (string, number, integer, boolean, null, array, object)", type));
  }

  Expected<JsonSchema::Node> object(const json& schema, const std::string& pointer) {
    const json properties = schema.value("properties", json::object());
    const json required = schema.value("required", json::array());
    if (!properties.is_object()) return error(pointer, "'properties' must be an object");
    if (!required.is_array()) return error(pointer, "'required' must be an array of property names");
    // Without properties: any object, unless additionalProperties limits the values (then only {} is sure to hold).
    const json additional = schema.value("additionalProperties", json(true));
    if (properties.empty() && required.empty() && additional == json(true)) {
      JsonSchema::Node any = node_of(JsonSchema::Kind::kAny);
      any.object_only = true;
      return any;
    }
    if (properties.size() > JsonSchema::kMaxProperties)
      return error(pointer, fmt::format("{} properties; at most {} are supported per object", properties.size(),
                                        JsonSchema::kMaxProperties));
    std::set<std::string> required_names;
    for (const json& name : required) {
      if (!name.is_string() || !properties.contains(name.get<std::string>()))
        return error(pointer, fmt::format("'required' names {}, which is not in 'properties'", name.dump()));
      required_names.insert(name.get<std::string>());
    }
    JsonSchema::Node node = node_of(JsonSchema::Kind::kObject);
    node.key_trie = new_trie();
    for (const auto& [name, value] : properties.items()) {
      Expected<uint32_t> child = compile(value, pointer + "/properties/" + escape_pointer(name));
      if (!child) return child.status();
      const auto index = static_cast<int>(node.properties.size());
      node.properties.push_back(
          JsonSchema::Property{.key = json(name).dump(), .node = *child, .required = required_names.contains(name)});
      add_to_trie(node.key_trie, node.properties.back().key, index);
    }
    return node;
  }

  static std::string escape_pointer(const std::string& name) {
    std::string out;
    for (char c : name) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  }

  void compute_shortest() {
    using Kind = JsonSchema::Kind;
    auto& nodes = out_.nodes_;
    // Literal tries: the fewest bytes from each node to a leaf (children come after their parents).
    for (size_t i = out_.trie_.size(); i-- > 0;) {
      JsonSchema::TrieNode& t = out_.trie_[i];
      t.to_leaf = t.leaf ? 0 : JsonSchema::kUnbounded;
      for (const auto& [byte, child] : t.children) t.to_leaf = std::min(t.to_leaf, out_.trie_[child].to_leaf + 1);
    }
    // A fixed point: recursive schemas shorten as their base cases are found.
    for (bool changed = true; changed;) {
      changed = false;
      for (JsonSchema::Node& n : nodes) {
        size_t len = JsonSchema::kUnbounded;
        switch (n.kind) {
          case Kind::kAny: len = n.object_only ? 2 : 1; break;  // {} or 0
          case Kind::kNumber:
          case Kind::kInteger: len = 1; break;
          case Kind::kString: len = saturated_add(2, n.min_length); break;
          case Kind::kLiterals: len = out_.trie_[n.literal_trie].to_leaf; break;
          case Kind::kArray:
            len = n.min_items == 0
                      ? 2
                      : saturated_add(saturated_add(2, n.min_items - 1),
                                      std::min<size_t>(JsonSchema::kUnbounded, nodes[n.items].shortest * n.min_items));
            break;
          case Kind::kAnyOf:
            for (uint32_t a : n.alternatives) len = std::min(len, nodes[a].shortest);
            break;
          case Kind::kObject: {
            n.required_tail.assign(n.properties.size() + 1, 0);
            for (size_t p = n.properties.size(); p-- > 0;) {
              const JsonSchema::Property& prop = n.properties[p];
              n.required_tail[p] = n.required_tail[p + 1];
              if (prop.required)  // ,"key":value
                n.required_tail[p] =
                    saturated_add(n.required_tail[p], saturated_add(prop.key.size() + 2, nodes[prop.node].shortest));
            }
            len = saturated_add(1, out_.rest_of_object(n, 0, true));
            break;
          }
        }
        if (len < n.shortest) {
          n.shortest = len;
          changed = true;
        }
      }
    }
  }

  const json& document_;
  JsonSchema& out_;
  std::map<std::string, uint32_t> by_pointer_;  // compiled schemas by JSON pointer ($ref targets)
  int depth_ = 0;
};

Expected<std::shared_ptr<const JsonSchema>> JsonSchema::compile(const std::string& schema_json) {
  json document;
  try {
    document = json::parse(schema_json);
  } catch (const json::parse_error& e) {
    return Status::invalid_argument(fmt::format("the schema is not JSON: {}", e.what()));
  }
  auto schema = std::make_shared<JsonSchema>();
  SchemaCompiler compiler(document, *schema);
  Expected<uint32_t> root = compiler.compile(document, "");
  if (!root) return root.status();
  schema->root_ = *root;
  if (Status s = compiler.finish(); !s) return s;
  return std::shared_ptr<const JsonSchema>(std::move(schema));
}

}  // namespace kvs
