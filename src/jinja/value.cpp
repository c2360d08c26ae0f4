#include "jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace kvs::jinja {

const Value* Arguments::get(size_t index, std::string_view name) const {
  for (const auto& [key, value] : named)
    if (key == name) return &value;
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::none() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}
Value::Value(bool b) : type_(Type::kBool), bool_(b) {}
Value::Value(int64_t i) : type_(Type::kInt), int_(i) {}
Value::Value(double f) : type_(Type::kFloat), float_(f) {}
Value::Value(std::string s) : type_(Type::kString), string_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(Array a) : type_(Type::kArray), array_(std::make_shared<Array>(std::move(a))) {}
Value::Value(Object o) : type_(Type::kObject), object_(std::make_shared<Object>(std::move(o))) {}
Value::Value(Function f) : type_(Type::kFunction), function_(std::make_shared<const Function>(std::move(f))) {}

Value Value::tuple(Array items) {
  Value v(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return j.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(j.get<uint64_t>()))
                                                                   : Value(j.get<double>());
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& item : j) a.push_back(from_json(item));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [key, item] : j.items()) o.emplace_back(key, from_json(item));
      return Value(std::move(o));
    }
    default: return Value();
  }
}

nlohmann::ordered_json Value::to_json_value() const {
  switch (type_) {
    case Type::kBool: return bool_;
    case Type::kInt: return int_;
    case Type::kFloat: return float_;
    case Type::kString: return *string_;
    case Type::kArray: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (const Value& v : *array_) a.push_back(v.to_json_value());
      return a;
    }
    case Type::kObject: {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      for (const auto& [k, v] : *object_) o[k] = v.to_json_value();
      return o;
    }
    default: return nullptr;
  }
}

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return bool_;
    case Type::kInt: return int_ != 0;
    case Type::kFloat: return float_ != 0;
    case Type::kString: return !string_->empty();
    case Type::kArray: return !array_->empty();
    case Type::kObject: return !object_->empty();
    case Type::kFunction: return true;
  }
  return false;
}

std::string python_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  // The shortest digits that read back as f, and the decimal exponent, then Python's repr layout: positional
  // for exponents -4..15, else d.ddde+XX.
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, end);  // e.g. -1.2345e+02
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
  } else {
    const auto int_digits = static_cast<size_t>(exponent + 1);
    if (digits.size() <= int_digits) {
      out.append(digits).append(int_digits - digits.size(), '0').append(".0");
    } else {
      out.append(digits, 0, int_digits).append(".").append(digits, int_digits);
    }
  }
  return out;
}

std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char ch : s) {
    const auto c = static_cast<uint8_t>(ch);
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kString: return *string_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return bool_ ? "True" : "False";
    case Type::kInt: return std::to_string(int_);
    case Type::kFloat: return python_float(float_);
    case Type::kString: return python_string_repr(*string_);
    case Type::kArray: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < array_->size(); ++i) out.append(i ? ", " : "").append((*array_)[i].repr());
      if (tuple_ && array_->size() == 1) out += ',';
      return out + (tuple_ ? ")" : "]");
    }
    case Type::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < object_->size(); ++i)
        out.append(i ? ", " : "")
            .append(python_string_repr((*object_)[i].first))
            .append(": ")
            .append((*object_)[i].second.repr());
      return out + "}";
    }
    case Type::kFunction: return "<function>";
  }
  return "";
}

bool Value::equals(const Value& other) const {
  const bool numeric = is_number() || is_bool();
  const bool other_numeric = other.is_number() || other.is_bool();
  if (numeric && other_numeric) {
    if (is_float() || other.is_float()) return as_float() == other.as_float();
    return as_int() == other.as_int();
  }
  if (type_ != other.type_) return false;
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return true;
    case Type::kString: return *string_ == *other.string_;
    case Type::kArray:
      return array_->size() == other.array_->size() &&
             std::equal(array_->begin(), array_->end(), other.array_->begin(),
                        [](const Value& a, const Value& b) { return a.equals(b); });
    case Type::kObject:
      if (object_->size() != other.object_->size()) return false;
      for (const auto& [key, value] : *object_) {
        const Value* theirs = other.find(key);
        if (!theirs || !value.equals(*theirs)) return false;
      }
      return true;
    case Type::kFunction: return function_ == other.function_;
    default: return false;
  }
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : *object_)
    if (k == key) return &v;
  return nullptr;
}

namespace {

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<uint8_t>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

struct JsonWriter {
  int indent;
  bool sort_keys;
  std::string_view item_separator, key_separator;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  }
  void write(const Value& v, int level) {
    switch (v.type()) {
      case Value::Type::kFloat: {
        const double f = v.as_float();
        out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : python_float(f);
        break;
      }
      case Value::Type::kBool: out += v.as_bool() ? "true" : "false"; break;
      case Value::Type::kInt: out += std::to_string(v.as_int()); break;
      case Value::Type::kString: json_string(v.as_string(), out); break;
      case Value::Type::kArray: {
        const Array& a = v.as_array();
        if (a.empty()) {
          out += "[]";
          break;
        }
        out += '[';
        for (size_t i = 0; i < a.size(); ++i) {
          if (i) out += item_separator;
          if (indent >= 0) newline(level + 1);
          write(a[i], level + 1);
        }
        if (indent >= 0) newline(level);
        out += ']';
        break;
      }
      case Value::Type::kObject: {
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& item : v.as_object()) items.push_back(&item);
        if (sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        if (items.empty()) {
          out += "{}";
          break;
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_separator;
          if (indent >= 0) newline(level + 1);
          json_string(items[i]->first, out);
          out += key_separator;
          write(items[i]->second, level + 1);
        }
        if (indent >= 0) newline(level);
        out += '}';
        break;
      }
      case Value::Type::kFunction: throw TemplateError("Object of type function is not JSON serializable");
      default: out += "null"; break;
    }
  }
};

}  // namespace

std::string Value::to_json(int indent, bool sort_keys, std::string_view item_separator,
                           std::string_view key_separator) const {
  JsonWriter writer{indent, sort_keys, item_separator, key_separator, {}};
  writer.write(*this, 0);
  return std::move(writer.out);
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kArray: return "list";
    case Type::kObject: return "dict";
    case Type::kFunction: return "function";
  }
  return "?";
}

}  // namespace kvs::jinja
