// Template::parse and Template::render: walks the tree parser.cpp builds, with Jinja's scoping (a for loop's body
// and a macro's have their own scope; {% set %} writes the innermost; namespaces are shared objects).
#include <fmt/format.h>

#include <ctime>
#include <unordered_map>
#include <utility>

#include "jinja/filters.h"
#include "jinja/jinja_template.h"
#include "jinja/operations.h"
#include "jinja/parser.h"

namespace kvs::jinja {
namespace {

// raise_exception(message): its message is the error, word for word.
struct RaisedError : TemplateError {
  using TemplateError::TemplateError;
};

constexpr int64_t kMaxRange = 1'000'000;

class Renderer {
 public:
  Renderer(const Object& variables, const RenderOptions& options) : options_(options) {
    scopes_.emplace_back();
    define_globals();
    for (const auto& [name, value] : variables) scopes_[0][name] = value;
  }

  std::string run(const Body& body) {
    std::string out;
    if (render(body, out) != Flow::kNormal) throw TemplateError("break or continue outside a for loop");
    return out;
  }

  size_t line() const { return line_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  void define_globals() {
    Scope& g = scopes_[0];
    g["raise_exception"] = Value(Function([](const Arguments& a) -> Value {
      throw RaisedError(a.positional.empty() ? std::string() : a.positional[0].str());
    }));
    g["strftime_now"] = Value(Function([this](const Arguments& a) {
      const std::time_t t = std::chrono::system_clock::to_time_t(options_.now);
      std::tm tm{};
      gmtime_r(&t, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, a.positional.empty() ? "" : a.positional[0].str().c_str(), &tm);
      return Value(std::string(buf, n));
    }));
    g["range"] = Value(Function([](const Arguments& a) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.positional.size() == 1) {
        stop = a.positional[0].as_int();
      } else if (a.positional.size() >= 2) {
        start = a.positional[0].as_int();
        stop = a.positional[1].as_int();
        if (a.positional.size() >= 3) step = a.positional[2].as_int();
      }
      if (step == 0) throw TemplateError("range() arg 3 must not be zero");
      const int64_t span = step > 0 ? stop - start : start - stop;
      if (span / (step > 0 ? step : -step) > kMaxRange)
        throw TemplateError(fmt::format("range() of more than {} items", kMaxRange));
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return Value(std::move(out));
    }));
    const auto object_of_keywords = [](const Arguments& a) {
      Object o;
      if (!a.positional.empty() && a.positional[0].is_object()) o = a.positional[0].as_object();
      for (const auto& [k, v] : a.named) o.emplace_back(k, v);
      return Value(std::move(o));
    };
    g["namespace"] = Value(Function(object_of_keywords));
    g["dict"] = Value(Function(object_of_keywords));
  }

  Value lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > 0;) {
      const auto it = scopes_[i].find(name);
      if (it != scopes_[i].end()) return it->second;
    }
    return Value();
  }

  void assign(const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = value;
      return;
    }
    const std::vector<Value> items = iterate(value);
    if (items.size() != targets.size())
      throw TemplateError(fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = items[i];
  }

  Flow render(const Body& body, std::string& out) {
    for (const NodePtr& node : body) {
      line_ = node->line;
      const Flow flow = render(*node, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow render(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::kText: out += n.text; return Flow::kNormal;
      case Node::Kind::kOutput:
        out += eval(*n.expr).str();
        if (out.size() > kMaxOutput) throw TemplateError(fmt::format("the output passed {} bytes", kMaxOutput));
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [condition, body] : n.branches)
          if (eval(*condition).truthy()) return render(body, out);
        return render(n.otherwise, out);
      case Node::Kind::kFor: return render_for(n, out);
      case Node::Kind::kSet: {
        const Value value = eval(*n.expr);
        if (n.attribute.empty()) {
          assign(n.targets, value);
          return Flow::kNormal;
        }
        const Value object = lookup(n.targets[0]);
        if (!object.is_object()) throw TemplateError(fmt::format("cannot assign attribute on '{}'", n.targets[0]));
        for (auto& [key, v] : object.as_object()) {
          if (key == n.attribute) {
            v = value;
            return Flow::kNormal;
          }
        }
        object.as_object().emplace_back(n.attribute, value);
        return Flow::kNormal;
      }
      case Node::Kind::kSetBlock: {
        std::string text;
        render(n.body, text);
        assign(n.targets, Value(text));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: define_macro(n); return Flow::kNormal;
      case Node::Kind::kCallBlock: {
        // The macro called gets caller(): the block's body, rendered in the scopes of the call site.
        std::vector<Scope> site = scopes_;
        pending_caller_ = Value(Function([this, &n, site](const Arguments&) {
          std::vector<Scope> saved = std::exchange(scopes_, site);
          std::string text;
          render(n.body, text);
          scopes_ = std::move(saved);
          return Value(text);
        }));
        out += eval(*n.expr).str();
        pending_caller_ = Value();
        return Flow::kNormal;
      }
      case Node::Kind::kFilterBlock: {
        std::string text;
        render(n.body, text);
        out += filter_chain(*n.expr, Value(text)).str();
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow render_for(const Node& n, std::string& out) {
    const Value iterable = eval(*n.expr);
    if (iterable.is_none()) throw TemplateError("'NoneType' object is not iterable");
    std::vector<Value> items = iterate(iterable);
    scopes_.emplace_back();
    if (n.condition) {  // for x in xs if cond: the items that pass, before loop.* counts them
      std::vector<Value> kept;
      for (const Value& item : items) {
        assign(n.targets, item);
        if (eval(*n.condition).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto count = static_cast<int64_t>(items.size());
    if ((iterations_ += count) > kMaxIterations)
      throw TemplateError(fmt::format("the loops ran more than {} times", kMaxIterations));
    for (int64_t i = 0; i < count; ++i) {
      scopes_.back().clear();  // each iteration starts from the enclosing scopes' values, as in Jinja
      assign(n.targets, items[static_cast<size_t>(i)]);
      Array cycle_items;
      Object loop{{"index", Value(i + 1)},
                  {"index0", Value(i)},
                  {"revindex", Value(count - i)},
                  {"revindex0", Value(count - i - 1)},
                  {"first", Value(i == 0)},
                  {"last", Value(i == count - 1)},
                  {"length", Value(count)},
                  {"depth", Value(int64_t{1})},
                  {"depth0", Value(int64_t{0})},
                  {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value()},
                  {"nextitem", i + 1 < count ? items[static_cast<size_t>(i + 1)] : Value()},
                  {"cycle", Value(Function([i](const Arguments& a) {
                     if (a.positional.empty()) throw TemplateError("no items for cycling given");
                     return a.positional[static_cast<size_t>(i) % a.positional.size()];
                   }))}};
      scopes_.back()["loop"] = Value(std::move(loop));
      if (render(n.body, out) == Flow::kBreak) break;
    }
    scopes_.pop_back();
    if (count == 0) return render(n.otherwise, out);
    return Flow::kNormal;
  }

  void define_macro(const Node& n) {
    const size_t depth = scopes_.size();  // the macro sees the scopes it was defined in, not its caller's
    scopes_.back()[n.text] = Value(Function([this, &n, depth](const Arguments& a) {
      if (++macro_depth_ > kMaxMacroDepth)
        throw TemplateError(fmt::format("macro '{}' calls itself deeper than {} levels", n.text, kMaxMacroDepth));
      std::vector<Scope> saved(scopes_.begin() + static_cast<std::ptrdiff_t>(depth), scopes_.end());
      scopes_.resize(depth);
      scopes_.emplace_back();
      if (!pending_caller_.is_undefined()) scopes_.back()["caller"] = std::exchange(pending_caller_, Value());
      for (size_t i = 0; i < n.parameters.size(); ++i) {
        const auto& [name, fallback] = n.parameters[i];
        const Value* given = a.get(i, name);
        scopes_.back()[name] = given ? *given : fallback ? eval(*fallback) : Value();
      }
      std::string text;
      const size_t line = line_;
      render(n.body, text);
      line_ = line;
      scopes_.pop_back();
      scopes_.insert(scopes_.end(), saved.begin(), saved.end());
      --macro_depth_;
      return Value(text);
    }));
  }

  Arguments arguments(const Expr& e) {
    Arguments args;
    for (const ExprPtr& item : e.items) args.positional.push_back(eval(*item));
    for (const auto& [name, value] : e.keywords) args.named.emplace_back(name, eval(*value));
    return args;
  }

  Value filter_chain(const Expr& e, const Value& input) {
    if (e.kind != Expr::Kind::kFilter) return input;
    return apply_filter(e.name, filter_chain(*e.a, input), arguments(e));
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Array items;
        for (const ExprPtr& item : e.items) items.push_back(eval(*item));
        return e.kind == Expr::Kind::kTuple ? Value::tuple(std::move(items)) : Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        Object o;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2)
          o.emplace_back(eval(*e.items[i]).str(), eval(*e.items[i + 1]));
        return Value(std::move(o));
      }
      case Expr::Kind::kAttribute: return attribute(eval(*e.a), e.name);
      case Expr::Kind::kIndex: return subscript(eval(*e.a), eval(*e.b));
      case Expr::Kind::kSlice: {
        const auto part = [&](size_t i) { return e.items[i] ? eval(*e.items[i]) : Value(); };
        return slice(part(0), part(1), part(2), part(3));
      }
      case Expr::Kind::kCall: {
        const Value f = eval(*e.a);
        if (!f.is_function()) throw TemplateError(fmt::format("'{}' object is not callable", f.type_name()));
        return f.as_function()(arguments(e));
      }
      case Expr::Kind::kFilter: return apply_filter(e.name, eval(*e.a), arguments(e));
      case Expr::Kind::kTest: return Value(apply_test(e.name, eval(*e.a), arguments(e)) != e.negated);
      case Expr::Kind::kNegate: return negate(eval(*e.a));
      case Expr::Kind::kNot: return Value(!eval(*e.a).truthy());
      case Expr::Kind::kBinary: {
        const Value result = binary_operator(e.name, eval(*e.a), eval(*e.b));
        return e.negated ? Value(!result.truthy()) : result;
      }
      case Expr::Kind::kAnd: {
        Value a = eval(*e.a);
        return a.truthy() ? eval(*e.b) : a;
      }
      case Expr::Kind::kOr: {
        Value a = eval(*e.a);
        return a.truthy() ? a : eval(*e.b);
      }
      case Expr::Kind::kCondition:
        if (eval(*e.b).truthy()) return eval(*e.a);
        return e.c ? eval(*e.c) : Value();
    }
    return Value();
  }

  const RenderOptions& options_;
  std::vector<Scope> scopes_;
  Value pending_caller_;  // a {% call %} block's body, for the macro it calls
  // A template is untrusted input: recursion, loops and output are bounded.
  static constexpr int kMaxMacroDepth = 100;
  static constexpr int64_t kMaxIterations = 10'000'000;
  static constexpr size_t kMaxOutput = size_t{64} << 20;
  int macro_depth_ = 0;
  int64_t iterations_ = 0;
  size_t line_ = 0;
};

// Filters and tests unknown to the subset are refused when the template is parsed.
void check_names(const Expr& e) {
  if (e.kind == Expr::Kind::kFilter && !has_filter(e.name))
    throw TemplateError(fmt::format("template error at line {}: the filter '{}' is not supported", e.line, e.name));
  if (e.kind == Expr::Kind::kTest && !has_test(e.name))
    throw TemplateError(fmt::format("template error at line {}: the test '{}' is not supported", e.line, e.name));
  for (const Expr* child : {e.a.get(), e.b.get(), e.c.get()})
    if (child) check_names(*child);
  for (const ExprPtr& item : e.items)
    if (item) check_names(*item);
  for (const auto& [name, value] : e.keywords) check_names(*value);
}

void check_names(const Body& body) {
  for (const NodePtr& n : body) {
    for (const Expr* e : {n->expr.get(), n->condition.get()})
      if (e) check_names(*e);
    for (const auto& [condition, branch] : n->branches) {
      check_names(*condition);
      check_names(branch);
    }
    for (const auto& [name, fallback] : n->parameters)
      if (fallback) check_names(*fallback);
    check_names(n->body);
    check_names(n->otherwise);
  }
}

}  // namespace

Expected<Template> Template::parse(std::string_view source) {
  try {
    auto body = std::make_shared<Body>(parse_template(source));
    check_names(*body);
    return Template(std::move(body));
  } catch (const TemplateError& e) {
    return Status::invalid_argument(e.what());
  }
}

Expected<std::string> Template::render(const Object& variables, const RenderOptions& options) const {
  Renderer renderer(variables, options);
  try {
    return renderer.run(*body_);
  } catch (const RaisedError& e) {
    return Status::invalid_argument(e.what());
  } catch (const TemplateError& e) {
    return Status::invalid_argument(fmt::format("template error at line {}: {}", renderer.line(), e.what()));
  }
}

}  // namespace kvs::jinja
