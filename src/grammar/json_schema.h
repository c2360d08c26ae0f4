// A JSON Schema compiled for structured outputs (OpenAI's response_format json_schema): the nodes the schema machine
// (schema_machine.h) walks while the output is written, each with the length of its shortest instance.
//
// Supported: type (one or a list), properties + required (written in the schema's order; optional ones may be left
// out; no other keys are written, whatever additionalProperties says), items, minItems/maxItems, enum, const,
// minLength/maxLength, anyOf (and allOf of one schema), $ref to any JSON pointer in the document ("#/$defs/Node",
// "#", recursion included), $defs/definitions. Annotations (title, description, default, examples, $schema, $id,
// $comment, strict...) are ignored. Any other keyword (pattern, format, minimum, oneOf, ...) is refused by name: an
// output that might not validate is never promised. Untyped schemas ({} or true) take any JSON value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvs {

class JsonSchema {
 public:
  static constexpr size_t kUnbounded = SIZE_MAX / 4;  // a length that no budget meets (no finite instance)
  static constexpr size_t kMaxProperties = 64;        // per object
  static constexpr uint32_t kNoLimit = UINT32_MAX;

  enum class Kind : uint8_t {
    kAny,       // any JSON value (object_only: any object)
    kObject,    // known properties
    kArray,     // items
    kString,    // with a length range
    kNumber,    // any number
    kInteger,   // '-'? digits
    kLiterals,  // one of a set of JSON texts (enum, const, boolean, null)
    kAnyOf,     // one of the alternatives
  };
  struct Property {
    std::string key;  // as written: the JSON string with its quotes ("\"name\"")
    uint32_t node = 0;
    bool required = false;
  };
  struct Node {
    Kind kind = Kind::kAny;
    bool object_only = false;           // kAny: an object ({"type": "object"} without properties)
    std::vector<Property> properties;   // kObject, in schema order
    std::vector<size_t> required_tail;  // kObject [i]: bytes of the required properties from i on, each as ,"k":v
    uint32_t key_trie = 0;              // kObject: the keys' trie (its root)
    uint32_t items = 0;                 // kArray
    uint32_t min_items = 0, max_items = kNoLimit;
    uint32_t min_length = 0, max_length = kNoLimit;  // kString, in code points
    uint32_t literal_trie = 0;                       // kLiterals
    std::vector<uint32_t> alternatives;              // kAnyOf
    size_t shortest = kUnbounded;                    // bytes of the shortest instance, written compactly
  };
  // The bytes of literals and keys as a trie: a key trie's leaf holds its property's index; below[] says which
  // properties' keys go through the node (bit p), so the machine refuses a byte that leads only to keys not allowed.
  struct TrieNode {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // (byte, node)
    bool leaf = false;
    uint32_t property = 0;  // key tries: the leaf's property
    uint64_t below = 0;     // key tries: the properties whose keys pass through here
    uint32_t depth = 0;     // bytes from the root
    size_t to_leaf = 0;     // literal tries: the fewest bytes to a leaf
    // The child reached by byte c, or -1.
    int64_t child(uint8_t c) const;
  };

  // Compiles a schema given as JSON text; the error names the keyword and where it is (a JSON pointer).
  static Expected<std::shared_ptr<const JsonSchema>> compile(const std::string& schema_json);

  const Node& node(uint32_t i) const { return nodes_[i]; }
  const TrieNode& trie(uint32_t i) const { return trie_[i]; }
  uint32_t root() const { return root_; }
  // The shortest completion of an object from property `next` on (required ones only), with '}' and, unless
  // `first` (nothing written yet), the comma before each.
  size_t rest_of_object(const Node& object, size_t next, bool first) const;

 private:
  friend class SchemaCompiler;
  std::vector<Node> nodes_;
  std::vector<TrieNode> trie_;
  uint32_t root_ = 0;
};

}  // namespace kvs
