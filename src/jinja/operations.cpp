#include "jinja/operations.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvs::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw TemplateError(what); }

constexpr uint64_t kMaxRepeated = 1 << 24;  // 'x' * n: a template is untrusted input

bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }

bool python_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The UTF-8 characters of s.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) type_error("integer division or modulo by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

const Value* arg(const Arguments& args, size_t index, std::string_view name) { return args.get(index, name); }

Value string_method(const std::string& s, const std::string& name) {
  const auto bind = [](auto f) { return Value(Function(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return bind([s, name](const Arguments& a) {
      const Value* chars = arg(a, 0, "chars");
      return Value(strip(s, chars ? *chars : Value(), name != "rstrip", name != "lstrip"));
    });
  }
  if (name == "upper") return bind([s](const Arguments&) { return Value(upper(s)); });
  if (name == "lower") return bind([s](const Arguments&) { return Value(lower(s)); });
  if (name == "title") return bind([s](const Arguments&) { return Value(title_case(s)); });
  if (name == "capitalize") {
    return bind([s](const Arguments&) {
      std::string out = lower(s);
      if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
      return Value(out);
    });
  }
  if (name == "startswith" || name == "endswith") {
    return bind([s, name](const Arguments& a) {
      const Value* p = arg(a, 0, "prefix");
      if (!p) type_error(name + "() takes at least 1 argument");
      std::vector<Value> options = p->is_array() ? p->as_array() : std::vector<Value>{*p};
      for (const Value& o : options) {
        if (!o.is_string()) type_error(name + " first arg must be str or a tuple of str, not " + o.type_name());
        const std::string& t = o.as_string();
        const bool hit = name == "startswith"
                             ? s.compare(0, t.size(), t) == 0
                             : s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
        if (hit) return Value(true);
      }
      return Value(false);
    });
  }
  if (name == "split" || name == "rsplit") {
    return bind([s](const Arguments& a) {
      const Value* sep = arg(a, 0, "sep");
      const Value* max = arg(a, 1, "maxsplit");
      int64_t splits = max && max->is_int() ? max->as_int() : -1;
      Array parts;
      if (!sep || sep->is_none()) {
        size_t i = 0;
        while (i < s.size()) {
          while (i < s.size() && python_space(s[i])) ++i;
          if (i >= s.size()) break;
          if (splits == 0) {
            std::string rest = s.substr(i);
            while (!rest.empty() && python_space(rest.back())) rest.pop_back();
            parts.emplace_back(rest);
            break;
          }
          size_t j = i;
          while (j < s.size() && !python_space(s[j])) ++j;
          parts.emplace_back(s.substr(i, j - i));
          --splits;
          i = j;
        }
        return Value(std::move(parts));
      }
      if (!sep->is_string()) type_error("must be str or None, not " + sep->type_name());
      const std::string& d = sep->as_string();
      if (d.empty()) type_error("empty separator");
      size_t i = 0;
      while (true) {
        const size_t j = splits == 0 ? std::string::npos : s.find(d, i);
        if (j == std::string::npos) {
          parts.emplace_back(s.substr(i));
          break;
        }
        parts.emplace_back(s.substr(i, j - i));
        --splits;
        i = j + d.size();
      }
      return Value(std::move(parts));
    });
  }
  if (name == "replace") {
    return bind([s](const Arguments& a) {
      const Value* old_value = arg(a, 0, "old");
      const Value* new_value = arg(a, 1, "new");
      const Value* count = arg(a, 2, "count");
      if (!old_value || !new_value) type_error("replace() takes at least 2 arguments");
      int64_t left = count && count->is_int() ? count->as_int() : -1;
      const std::string& from = old_value->str();
      const std::string& to = new_value->str();
      std::string out;
      size_t i = 0;
      if (from.empty()) return Value(s);
      while (left != 0) {
        const size_t j = s.find(from, i);
        if (j == std::string::npos) break;
        out += s.substr(i, j - i) + to;
        i = j + from.size();
        --left;
      }
      return Value(out + s.substr(i));
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return bind([s, name](const Arguments& a) {
      const Value* sub = arg(a, 0, "sub");
      if (!sub || !sub->is_string()) type_error(name + "() takes a string");
      const std::string& t = sub->as_string();
      if (name == "count") {
        if (t.empty()) return Value(static_cast<int64_t>(characters(s).size() + 1));
        int64_t n = 0;
        for (size_t i = s.find(t); i != std::string::npos; i = s.find(t, i + t.size())) ++n;
        return Value(n);
      }
      const size_t at = name == "find" ? s.find(t) : s.rfind(t);
      return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(at));
    });
  }
  if (name == "join") {
    return bind([s](const Arguments& a) {
      const Value* items = arg(a, 0, "iterable");
      std::string out;
      if (items) {
        const std::vector<Value> list = iterate(*items);
        for (size_t i = 0; i < list.size(); ++i) out += (i ? s : "") + list[i].str();
      }
      return Value(out);
    });
  }
  if (name == "splitlines") {
    return bind([s](const Arguments&) {
      Array lines;
      size_t i = 0;
      while (i < s.size()) {
        size_t j = s.find_first_of("\r\n", i);
        if (j == std::string::npos) {
          lines.emplace_back(s.substr(i));
          break;
        }
        lines.emplace_back(s.substr(i, j - i));
        i = j + (s.compare(j, 2, "\r\n") == 0 ? 2 : 1);
      }
      return Value(std::move(lines));
    });
  }
  return Value();
}

Value dict_method(const Value& dict, const std::string& name) {
  if (name == "items") {
    return Value(Function([dict](const Arguments&) {
      Array out;
      for (const auto& [k, v] : dict.as_object()) out.push_back(Value::tuple({Value(k), v}));
      return Value(std::move(out));
    }));
  }
  if (name == "keys" || name == "values") {
    return Value(Function([dict, name](const Arguments&) {
      Array out;
      for (const auto& [k, v] : dict.as_object()) out.push_back(name == "keys" ? Value(k) : v);
      return Value(std::move(out));
    }));
  }
  if (name == "get") {
    return Value(Function([dict](const Arguments& a) {
      const Value* key = arg(a, 0, "key");
      const Value* fallback = arg(a, 1, "default");
      if (key && key->is_string())
        if (const Value* v = dict.find(key->as_string())) return *v;
      return fallback ? *fallback : Value::none();
    }));
  }
  return Value();
}

}  // namespace

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const auto strippable = [&](char c) {
    return chars.is_string() ? chars.as_string().find(c) != std::string::npos : python_space(c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strippable(s[b])) ++b;
  if (right)
    while (e > b && strippable(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool alpha = std::isalpha(u) != 0;
    if (alpha) c = static_cast<char>(previous_cased ? std::tolower(u) : std::toupper(u));
    previous_cased = alpha;
  }
  return out;
}

Value binary_operator(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "<") return Value(less_than(a, b));
  if (op == ">") return Value(less_than(b, a));
  if (op == "<=") return Value(!less_than(b, a));
  if (op == ">=") return Value(!less_than(a, b));
  if (op == "in") return Value(contains(b, a));
  if (a.is_undefined() || b.is_undefined()) type_error(fmt::format("'{}' on an undefined value", op));
  if (numeric(a) && numeric(b)) {
    const bool ints = !a.is_float() && !b.is_float();
    if (op == "+") return ints ? Value(a.as_int() + b.as_int()) : Value(a.as_float() + b.as_float());
    if (op == "-") return ints ? Value(a.as_int() - b.as_int()) : Value(a.as_float() - b.as_float());
    if (op == "*") return ints ? Value(a.as_int() * b.as_int()) : Value(a.as_float() * b.as_float());
    if (op == "/") {
      if (b.as_float() == 0) type_error("division by zero");
      return Value(a.as_float() / b.as_float());
    }
    if (op == "//") {
      if (ints) return Value(floor_div(a.as_int(), b.as_int()));
      if (b.as_float() == 0) type_error("float floor division by zero");
      return Value(std::floor(a.as_float() / b.as_float()));
    }
    if (op == "%") {
      if (ints) return Value(a.as_int() - b.as_int() * floor_div(a.as_int(), b.as_int()));
      if (b.as_float() == 0) type_error("float modulo");
      const double m = std::fmod(a.as_float(), b.as_float());
      return Value(m != 0 && ((m < 0) != (b.as_float() < 0)) ? m + b.as_float() : m);
    }
    if (op == "**") {
      if (ints && b.as_int() >= 0 && b.as_int() <= 64) {  // (larger powers overflow: a float, as no loop runs long)
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
        return Value(r);
      }
      return Value(std::pow(a.as_float(), b.as_float()));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (op == "+" && a.is_array() && b.is_array()) {
    Array out = a.as_array();
    out.insert(out.end(), b.as_array().begin(), b.as_array().end());
    return Value(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) {
    const size_t unit = a.is_string() ? a.as_string().size() : a.as_array().size();
    if (b.as_int() > 0 && unit > 0 && static_cast<uint64_t>(b.as_int()) > kMaxRepeated / unit)
      type_error(fmt::format("a repetition of more than {} items or bytes", kMaxRepeated));
    if (a.is_string()) {
      std::string out;
      for (int64_t i = 0; i < b.as_int(); ++i) out += a.as_string();
      return Value(out);
    }
    Array out;
    for (int64_t i = 0; i < b.as_int(); ++i) out.insert(out.end(), a.as_array().begin(), a.as_array().end());
    return Value(std::move(out));
  }
  if (op == "*" && (b.is_string() || b.is_array()) && (a.is_int() || a.is_bool())) return binary_operator(op, b, a);
  if (op == "+" && a.is_string())
    type_error(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
  type_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

Value negate(const Value& a) {
  if (a.is_float()) return Value(-a.as_float());
  if (numeric(a)) return Value(-a.as_int());
  type_error(fmt::format("bad operand type for unary -: '{}'", a.type_name()));
}

bool less_than(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) return a.as_float() < b.as_float();
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_array() && b.is_array()) {
    const Array &x = a.as_array(), &y = b.as_array();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (less_than(x[i], y[i])) return true;
      if (less_than(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  type_error(fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_array())
    return std::any_of(container.as_array().begin(), container.as_array().end(),
                       [&](const Value& v) { return v.equals(item); });
  if (container.is_object()) return item.is_string() && container.find(item.as_string()) != nullptr;
  if (container.is_undefined()) return false;
  type_error(fmt::format("argument of type '{}' is not iterable", container.type_name()));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return {};
    case Value::Type::kArray: return v.as_array();
    case Value::Type::kObject: {
      std::vector<Value> keys;
      for (const auto& [k, item] : v.as_object()) keys.emplace_back(k);
      return keys;
    }
    case Value::Type::kString: {
      std::vector<Value> out;
      for (std::string& c : characters(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    default: type_error(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

size_t length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return 0;
    case Value::Type::kString: return characters(v.as_string()).size();
    case Value::Type::kArray: return v.as_array().size();
    case Value::Type::kObject: return v.as_object().size();
    default: type_error(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
}

Value subscript(const Value& container, const Value& key) {
  if (container.is_object()) {
    if (key.is_string())
      if (const Value* v = container.find(key.as_string())) return *v;
    return Value();
  }
  if ((container.is_array() || container.is_string()) && (key.is_int() || key.is_bool())) {
    const std::vector<Value> items = container.is_array() ? container.as_array() : iterate(container);
    int64_t i = key.as_int();
    if (i < 0) i += static_cast<int64_t>(items.size());
    if (i < 0 || i >= static_cast<int64_t>(items.size())) return Value();
    return items[static_cast<size_t>(i)];
  }
  if (container.is_undefined()) type_error("cannot index an undefined value");
  if (key.is_string()) return attribute(container, key.as_string());
  return Value();
}

Value slice(const Value& container, const Value& start, const Value& stop, const Value& step) {
  const std::vector<Value> items = iterate(container);
  const auto n = static_cast<int64_t>(items.size());
  const int64_t s = step.is_undefined() || step.is_none() ? 1 : step.as_int();
  if (s == 0) type_error("slice step cannot be zero");
  const auto bound = [&](const Value& v, int64_t fallback) {
    if (v.is_undefined() || v.is_none()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    return s > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = bound(start, s > 0 ? 0 : n - 1);
  const int64_t e = bound(stop, s > 0 ? n : -1);
  Array out;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) out.push_back(items[static_cast<size_t>(i)]);
  if (container.is_string()) {
    std::string joined;
    for (const Value& c : out) joined += c.as_string();
    return Value(joined);
  }
  return Value(std::move(out));
}

Value attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) type_error(fmt::format("'{}' of an undefined value is undefined", name));
  if (object.is_object()) {
    if (const Value* v = object.find(name)) return *v;
    return dict_method(object, name);
  }
  if (object.is_string()) return string_method(object.as_string(), name);
  return Value();
}

}  // namespace kvs::jinja
