#include "jinja/filters.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "jinja/operations.h"

namespace kvs::jinja {
namespace {

using Filter = std::function<Value(const Value&, const Arguments&)>;
using Test = std::function<bool(const Value&, const Arguments&)>;

Value argument(const Arguments& args, size_t index, std::string_view name, Value fallback = Value()) {
  const Value* v = args.get(index, name);
  return v ? *v : std::move(fallback);
}

// Arguments without the first `n` positional ones (map/select pass the rest to the filter or test they name).
Arguments drop(const Arguments& args, size_t n) {
  Arguments rest;
  rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(n, args.positional.size())),
                         args.positional.end());
  rest.named = args.named;
  return rest;
}

// a.b.c of an item (map(attribute=...), selectattr, sort(attribute=...)).
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t i = 0;
  while (i <= path.size()) {
    const size_t dot = std::min(path.find('.', i), path.size());
    const std::string part = path.substr(i, dot - i);
    v = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)
            ? subscript(v, Value(static_cast<int64_t>(std::stoll(part))))
            : subscript(v, Value(part));
    i = dot + 1;
  }
  return v;
}

Value select_items(const Value& input, const Arguments& args, bool by_attribute, bool keep) {
  Array out;
  const size_t skip = by_attribute ? 2 : 1;
  const std::string test = args.positional.size() >= skip ? args.positional[skip - 1].str() : "";
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? attribute_path(item, argument(args, 0, "attribute").str()) : item;
    const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, drop(args, skip));
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

std::string indent_text(const std::string& s, const Value& width, bool first, bool blank) {
  const std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  std::string out;
  size_t i = 0;
  bool at_first = true;
  while (i <= s.size()) {
    const size_t nl = s.find('\n', i);
    const std::string line = s.substr(i, nl == std::string::npos ? std::string::npos : nl - i);
    const bool indent = (at_first ? first : true) && (blank || !strip(line, Value(), true, true).empty());
    out += (indent ? pad : "") + line;
    if (nl == std::string::npos) break;
    out += '\n';
    i = nl + 1;
    at_first = false;
  }
  return out;
}

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = [] {
    std::map<std::string, Filter, std::less<>> f;
    f["abs"] = [](const Value& v, const Arguments&) {
      return v.is_float() ? Value(std::fabs(v.as_float())) : Value(std::abs(v.as_int()));
    };
    f["capitalize"] = [](const Value& v, const Arguments&) {
      std::string s = lower(v.str());
      if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
      return Value(s);
    };
    f["length"] = [](const Value& v, const Arguments&) { return Value(static_cast<int64_t>(length(v))); };
    f["count"] = f["length"];
    f["default"] = [](const Value& v, const Arguments& a) {
      const bool boolean = argument(a, 1, "boolean", Value(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return argument(a, 0, "default_value", Value(""));
      return v;
    };
    f["d"] = f["default"];
    f["dictsort"] = [](const Value& v, const Arguments& a) {
      if (!v.is_object()) throw TemplateError(fmt::format("dictsort expects a dict, got {}", v.type_name()));
      std::vector<std::pair<std::string, Value>> items = v.as_object();
      const bool by_value = argument(a, 1, "by", Value("key")).str() == "value";
      std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
        return by_value ? less_than(x.second, y.second) : lower(x.first) < lower(y.first);
      });
      if (argument(a, 2, "reverse", Value(false)).truthy()) std::reverse(items.begin(), items.end());
      Array out;
      for (auto& [k, item] : items) out.push_back(Value::tuple({Value(k), item}));
      return Value(std::move(out));
    };
    f["first"] = [](const Value& v, const Arguments&) {
      const std::vector<Value> items = iterate(v);
      return items.empty() ? Value() : items.front();
    };
    f["last"] = [](const Value& v, const Arguments&) {
      const std::vector<Value> items = iterate(v);
      return items.empty() ? Value() : items.back();
    };
    f["float"] = [](const Value& v, const Arguments& a) {
      if (v.is_number() || v.is_bool()) return Value(v.as_float());
      try {
        return Value(std::stod(v.str()));
      } catch (const std::exception&) {
        return argument(a, 0, "default", Value(0.0));
      }
    };
    f["int"] = [](const Value& v, const Arguments& a) {
      if (v.is_number() || v.is_bool()) return Value(static_cast<int64_t>(v.as_float()));
      try {
        return Value(static_cast<int64_t>(std::stoll(v.str())));
      } catch (const std::exception&) {
        return argument(a, 0, "default", Value(int64_t{0}));
      }
    };
    f["indent"] = [](const Value& v, const Arguments& a) {
      return Value(indent_text(v.str(), argument(a, 0, "width", Value(int64_t{4})),
                               argument(a, 1, "first", Value(false)).truthy(),
                               argument(a, 2, "blank", Value(false)).truthy()));
    };
    f["items"] = [](const Value& v, const Arguments&) {
      Array out;
      if (v.is_object())
        for (const auto& [k, item] : v.as_object()) out.push_back(Value::tuple({Value(k), item}));
      return Value(std::move(out));
    };
    f["join"] = [](const Value& v, const Arguments& a) {
      const std::string sep = argument(a, 0, "d", Value("")).str();
      const Value attr = argument(a, 1, "attribute");
      std::string out;
      const std::vector<Value> items = iterate(v);
      for (size_t i = 0; i < items.size(); ++i)
        out += (i ? sep : "") + (attr.is_undefined() ? items[i] : attribute_path(items[i], attr.str())).str();
      return Value(out);
    };
    f["list"] = [](const Value& v, const Arguments&) { return Value(iterate(v)); };
    f["lower"] = [](const Value& v, const Arguments&) { return Value(lower(v.str())); };
    f["upper"] = [](const Value& v, const Arguments&) { return Value(upper(v.str())); };
    f["title"] = [](const Value& v, const Arguments&) { return Value(title_case(v.str())); };
    f["map"] = [](const Value& v, const Arguments& a) {
      Array out;
      const Value attr = argument(a, std::string::npos, "attribute");
      for (const Value& item : iterate(v)) {
        if (!attr.is_undefined()) {
          Value got = attribute_path(item, attr.str());
          if (got.is_undefined()) got = argument(a, std::string::npos, "default");
          out.push_back(got);
        } else {
          if (a.positional.empty()) throw TemplateError("map() needs a filter name or attribute=");
          out.push_back(apply_filter(a.positional[0].str(), item, drop(a, 1)));
        }
      }
      return Value(std::move(out));
    };
    const auto extreme = [](bool max) {
      return [max](const Value& v, const Arguments& a) {
        const std::vector<Value> items = iterate(v);
        if (items.empty()) return Value();
        const Value attr = argument(a, 1, "attribute");
        const auto key = [&](const Value& x) { return attr.is_undefined() ? x : attribute_path(x, attr.str()); };
        Value best = items[0];
        for (const Value& x : items)
          if (max ? less_than(key(best), key(x)) : less_than(key(x), key(best))) best = x;
        return best;
      };
    };
    f["max"] = extreme(true);
    f["min"] = extreme(false);
    f["select"] = [](const Value& v, const Arguments& a) { return select_items(v, a, false, true); };
    f["reject"] = [](const Value& v, const Arguments& a) { return select_items(v, a, false, false); };
    f["selectattr"] = [](const Value& v, const Arguments& a) { return select_items(v, a, true, true); };
    f["rejectattr"] = [](const Value& v, const Arguments& a) { return select_items(v, a, true, false); };
    f["replace"] = [](const Value& v, const Arguments& a) {
      Arguments rest = a;
      return attribute(Value(v.str()), "replace").as_function()(rest);
    };
    f["reverse"] = [](const Value& v, const Arguments&) {
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      if (v.is_string()) {
        std::string s;
        for (const Value& c : items) s += c.as_string();
        return Value(s);
      }
      return Value(std::move(items));
    };
    f["round"] = [](const Value& v, const Arguments& a) {
      const int64_t precision = argument(a, 0, "precision", Value(int64_t{0})).as_int();
      const std::string method = argument(a, 1, "method", Value("common")).str();
      const double scale = std::pow(10.0, static_cast<double>(precision));
      const double x = v.as_float() * scale;
      // Python's round: halves go to the even neighbour (round(2.5) == 2).
      const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
      return Value(r / scale);
    };
    f["safe"] = [](const Value& v, const Arguments&) { return v; };
    f["sort"] = [](const Value& v, const Arguments& a) {
      std::vector<Value> items = iterate(v);
      const bool reverse = argument(a, 0, "reverse", Value(false)).truthy();
      const bool case_sensitive = argument(a, 1, "case_sensitive", Value(false)).truthy();
      const Value attr = argument(a, 2, "attribute");
      const auto key = [&](const Value& x) {
        Value k = attr.is_undefined() ? x : attribute_path(x, attr.str());
        return k.is_string() && !case_sensitive ? Value(lower(k.as_string())) : k;
      };
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return reverse ? less_than(key(y), key(x)) : less_than(key(x), key(y));
      });
      return Value(std::move(items));
    };
    f["string"] = [](const Value& v, const Arguments&) { return Value(v.str()); };
    f["sum"] = [](const Value& v, const Arguments& a) {
      Value total = argument(a, 1, "start", Value(int64_t{0}));
      const Value attr = argument(a, 0, "attribute");
      for (const Value& x : iterate(v))
        total = binary_operator("+", total, attr.is_undefined() ? x : attribute_path(x, attr.str()));
      return total;
    };
    f["tojson"] = [](const Value& v, const Arguments& a) {
      const Value indent = argument(a, 0, "indent");
      const Value separators = argument(a, std::string::npos, "separators");
      const bool sort_keys = argument(a, std::string::npos, "sort_keys", Value(false)).truthy();
      const bool indented = indent.is_int();
      std::string item = indented ? "," : ", ", key = ": ";
      if (separators.is_array() && separators.as_array().size() == 2) {
        item = separators.as_array()[0].str();
        key = separators.as_array()[1].str();
      }
      return Value(v.to_json(indented ? static_cast<int>(indent.as_int()) : -1, sort_keys, item, key));
    };
    f["trim"] = [](const Value& v, const Arguments& a) {
      return Value(strip(v.str(), argument(a, 0, "chars"), true, true));
    };
    f["unique"] = [](const Value& v, const Arguments&) {
      Array out;
      for (const Value& x : iterate(v))
        if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return y.equals(x); })) out.push_back(x);
      return Value(std::move(out));
    };
    f["wordcount"] = [](const Value& v, const Arguments&) {
      return Value(static_cast<int64_t>(length(attribute(Value(v.str()), "split").as_function()({}))));
    };
    return f;
  }();
  return table;
}

const std::map<std::string, Test, std::less<>>& tests() {
  static const std::map<std::string, Test, std::less<>> table = [] {
    std::map<std::string, Test, std::less<>> t;
    const auto other = [](const Arguments& a) { return argument(a, 0, "value"); };
    t["defined"] = [](const Value& v, const Arguments&) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, const Arguments&) { return v.is_undefined(); };
    t["none"] = [](const Value& v, const Arguments&) { return v.is_none(); };
    t["boolean"] = [](const Value& v, const Arguments&) { return v.is_bool(); };
    t["true"] = [](const Value& v, const Arguments&) { return v.is_bool() && v.as_bool(); };
    t["false"] = [](const Value& v, const Arguments&) { return v.is_bool() && !v.as_bool(); };
    t["integer"] = [](const Value& v, const Arguments&) { return v.is_int(); };
    t["float"] = [](const Value& v, const Arguments&) { return v.is_float(); };
    t["number"] = [](const Value& v, const Arguments&) { return v.is_number() || v.is_bool(); };
    t["string"] = [](const Value& v, const Arguments&) { return v.is_string(); };
    t["mapping"] = [](const Value& v, const Arguments&) { return v.is_object(); };
    t["iterable"] = [](const Value& v, const Arguments&) { return v.is_string() || v.is_array() || v.is_object(); };
    t["sequence"] = t["iterable"];
    t["callable"] = [](const Value& v, const Arguments&) { return v.is_function(); };
    t["even"] = [](const Value& v, const Arguments&) { return v.as_int() % 2 == 0; };
    t["odd"] = [](const Value& v, const Arguments&) { return v.as_int() % 2 != 0; };
    t["divisibleby"] = [other](const Value& v, const Arguments& a) {
      const int64_t n = other(a).as_int();
      return n != 0 && v.as_int() % n == 0;
    };
    t["eq"] = [other](const Value& v, const Arguments& a) { return v.equals(other(a)); };
    t["equalto"] = t["=="] = t["eq"];
    t["ne"] = [other](const Value& v, const Arguments& a) { return !v.equals(other(a)); };
    t["!="] = t["ne"];
    t["lt"] = [other](const Value& v, const Arguments& a) { return less_than(v, other(a)); };
    t["<"] = t["lessthan"] = t["lt"];
    t["le"] = [other](const Value& v, const Arguments& a) { return !less_than(other(a), v); };
    t["<="] = t["le"];
    t["gt"] = [other](const Value& v, const Arguments& a) { return less_than(other(a), v); };
    t[">"] = t["greaterthan"] = t["gt"];
    t["ge"] = [other](const Value& v, const Arguments& a) { return !less_than(v, other(a)); };
    t[">="] = t["ge"];
    t["in"] = [other](const Value& v, const Arguments& a) { return contains(other(a), v); };
    t["sameas"] = [other](const Value& v, const Arguments& a) {
      const Value o = other(a);
      return v.type() == o.type() && (v.is_none() || v.is_undefined() || v.equals(o));
    };
    t["lower"] = [](const Value& v, const Arguments&) {
      return v.is_string() && lower(v.as_string()) == v.as_string();
    };
    t["upper"] = [](const Value& v, const Arguments&) {
      return v.is_string() && upper(v.as_string()) == v.as_string();
    };
    return t;
  }();
  return table;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().contains(name); }
bool has_test(const std::string& name) { return tests().contains(name); }

Value apply_filter(const std::string& name, const Value& input, const Arguments& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) throw TemplateError(fmt::format("no filter named '{}'", name));
  return it->second(input, args);
}

bool apply_test(const std::string& name, const Value& input, const Arguments& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) throw TemplateError(fmt::format("no test named '{}'", name));
  return it->second(input, args);
}

}  // namespace kvs::jinja
