// The values a chat template computes with, as Jinja2 (Python) has them: undefined, none, booleans, integers,
// floats, strings, lists and dicts (shared and ordered by insertion, as Python's) and callables (macros, globals,
// bound methods). Printing, comparing, truthiness and JSON follow Python: str(True) is "True", 1 == 1.0, an empty
// list is false, json.dumps writes {"a": 1, "b": [1, 2]}.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>  // (the full header is value.cpp's: it is slow to compile)
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvs::jinja {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python dicts

// A call's arguments: positional, then keyword.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The argument at `index` or named `name`, else nullptr.
  const Value* get(size_t index, std::string_view name) const;
};
using Function = std::function<Value(const Arguments&)>;

// A template's failure: a raise_exception() call (message as the template wrote it) or an error in evaluating it.
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Value {
 public:
  enum class Type : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);                                    // NOLINT: implicit, as the literals they stand for
  Value(int64_t i);                                 // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double f);                                  // NOLINT
  Value(std::string s);                             // NOLINT
  Value(const char* s) : Value(std::string(s)) {}   // NOLINT
  Value(Array a);                                   // NOLINT
  Value(Object o);                                  // NOLINT
  Value(Function f);                                // NOLINT
  static Value from_json(const nlohmann::ordered_json& j);
  // A list that prints as a Python tuple: ('a', 1) (dict items, tuple literals).
  static Value tuple(Array items);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat; }  // (not bool, as Jinja's test)
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  bool is_function() const { return type_ == Type::kFunction; }
  bool is_tuple() const { return tuple_; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return type_ == Type::kBool ? bool_ : int_; }
  double as_float() const { return type_ == Type::kFloat ? float_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *string_; }
  Array& as_array() const { return *array_; }
  Object& as_object() const { return *object_; }
  const Function& as_function() const { return *function_; }

  // Python's truthiness.
  bool truthy() const;
  // Python's str() (what {{ }} prints; undefined prints nothing) and repr().
  std::string str() const;
  std::string repr() const;
  // Python's ==.
  bool equals(const Value& other) const;
  // The member `key` of a dict (nullptr when absent).
  const Value* find(std::string_view key) const;
  // Python's json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys) (indent < 0: none).
  std::string to_json(int indent = -1, bool sort_keys = false, std::string_view item_separator = ", ",
                      std::string_view key_separator = ": ") const;
  nlohmann::ordered_json to_json_value() const;
  // The Python type's name, for errors ("str", "int", "list", "dict", ...).
  std::string type_name() const;

 private:
  Type type_ = Type::kUndefined;
  bool tuple_ = false;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<Array> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<const Function> function_;
};

// Python's repr of a float (shortest round trip: 0.1, 1.0, 1e+20, 1e-05, inf).
std::string python_float(double f);
// Python's repr of a string ('it''s' -> "it's").
std::string python_string_repr(const std::string& s);

}  // namespace kvs::jinja
