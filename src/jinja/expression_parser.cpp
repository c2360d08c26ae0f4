#include "jinja/expression_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "jinja/value.h"

namespace kvs::jinja {

using Type = Token::Type;

void ExpressionParser::fail(const std::string& what) const {
  throw TemplateError(fmt::format("template syntax error at line {}: {}", peek().line, what));
}

bool ExpressionParser::accept_operator(std::string_view op) {
  if (!at_operator(op)) return false;
  ++i_;
  return true;
}

bool ExpressionParser::accept_name(std::string_view name) {
  if (!at_name(name)) return false;
  ++i_;
  return true;
}

void ExpressionParser::expect_operator(std::string_view op) {
  if (!accept_operator(op)) fail(fmt::format("expected '{}', found '{}'", op, describe(peek())));
}

std::string ExpressionParser::expect_name() {
  if (peek().type != Type::kName) fail(fmt::format("expected a name, found '{}'", describe(peek())));
  return next().text;
}

std::string ExpressionParser::describe(const Token& t) {
  switch (t.type) {
    case Type::kEnd: return "the end of the template";
    case Type::kStatementEnd: return "%}";
    case Type::kExpressionEnd: return "}}";
    case Type::kText: return "text";
    default: return t.text;
  }
}

ExprPtr ExpressionParser::make(Expr::Kind kind, size_t line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr ExpressionParser::parse_tuple_or_expression() {
  const size_t line = peek().line;
  ExprPtr first = parse_expression();
  if (!at_operator(",")) return first;
  auto tuple = make(Expr::Kind::kTuple, line);
  tuple->items.push_back(std::move(first));
  while (accept_operator(",")) {
    if (peek().type == Type::kStatementEnd) break;
    tuple->items.push_back(parse_expression());
  }
  return tuple;
}

ExprPtr ExpressionParser::parse_expression() {
  ExprPtr e = parse_or();
  while (at_name("if")) {
    const size_t line = next().line;
    auto cond = make(Expr::Kind::kCondition, line);
    cond->a = std::move(e);
    cond->b = parse_or();
    if (accept_name("else")) cond->c = parse_expression();
    e = std::move(cond);
  }
  return e;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr e = parse_and();
  while (at_name("or")) {
    auto n = make(Expr::Kind::kOr, next().line);
    n->a = std::move(e);
    n->b = parse_and();
    e = std::move(n);
  }
  return e;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr e = parse_not();
  while (at_name("and")) {
    auto n = make(Expr::Kind::kAnd, next().line);
    n->a = std::move(e);
    n->b = parse_not();
    e = std::move(n);
  }
  return e;
}

ExprPtr ExpressionParser::parse_not() {
  if (at_name("not")) {
    auto n = make(Expr::Kind::kNot, next().line);
    n->a = parse_not();
    return n;
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  ExprPtr e = parse_add();
  while (true) {
    std::string op;
    bool negated = false;
    if (peek().type == Type::kOperator && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                           peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
      op = peek().text;
      ++i_;
    } else if (at_name("in")) {
      op = "in";
      ++i_;
    } else if (at_name("not") && at_name("in", 1)) {
      op = "in";
      negated = true;
      i_ += 2;
    } else {
      return e;
    }
    auto n = make(Expr::Kind::kBinary, peek().line);
    n->name = op;
    n->negated = negated;
    n->a = std::move(e);
    n->b = parse_add();
    e = std::move(n);
  }
}

ExprPtr ExpressionParser::binary(ExprPtr left, std::string op, ExprPtr right) {
  auto n = make(Expr::Kind::kBinary, left->line);
  n->name = std::move(op);
  n->a = std::move(left);
  n->b = std::move(right);
  return n;
}

ExprPtr ExpressionParser::parse_add() {
  ExprPtr e = parse_concat();
  while (at_operator("+") || at_operator("-")) {
    std::string op = next().text;
    e = binary(std::move(e), std::move(op), parse_concat());
  }
  return e;
}

ExprPtr ExpressionParser::parse_concat() {
  ExprPtr e = parse_multiply();
  while (at_operator("~")) {
    ++i_;
    e = binary(std::move(e), "~", parse_multiply());
  }
  return e;
}

ExprPtr ExpressionParser::parse_multiply() {
  ExprPtr e = parse_power();
  while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
    std::string op = next().text;
    e = binary(std::move(e), std::move(op), parse_power());
  }
  return e;
}

ExprPtr ExpressionParser::parse_power() {
  ExprPtr e = parse_unary(true);
  while (at_operator("**")) {
    ++i_;
    e = binary(std::move(e), "**", parse_unary(true));
  }
  return e;
}

ExprPtr ExpressionParser::parse_unary(bool with_filters) {
  ExprPtr e;
  if (at_operator("-")) {
    e = make(Expr::Kind::kNegate, next().line);
    e->a = parse_unary(false);
  } else if (accept_operator("+")) {
    e = parse_unary(false);
  } else {
    e = parse_postfix(parse_primary());
  }
  return with_filters ? parse_filter_chain(std::move(e)) : std::move(e);
}

// Filters, tests and calls after a value: x | f(a) | g, x is not defined.
ExprPtr ExpressionParser::parse_filter_chain(ExprPtr e) {
  while (true) {
    if (accept_operator("|")) {
      auto f = make(Expr::Kind::kFilter, peek().line);
      f->name = expect_name();
      while (accept_operator(".")) f->name.append(".").append(expect_name());
      if (accept_operator("(")) parse_arguments(*f);
      f->a = std::move(e);
      e = std::move(f);
    } else if (at_name("is")) {
      auto test = make(Expr::Kind::kTest, next().line);
      test->negated = accept_name("not");
      test->name = expect_name();
      if (accept_operator("(")) {
        parse_arguments(*test);
      } else if (starts_test_argument()) {
        test->items.push_back(parse_postfix(parse_primary()));
      }
      test->a = std::move(e);
      e = std::move(test);
    } else if (at_operator("(")) {
      e = parse_postfix(std::move(e));
    } else {
      return e;
    }
  }
}

bool ExpressionParser::starts_test_argument() const {
  const Token& t = peek();
  if (t.type == Type::kName) {
    static const char* const kStops[] = {"else", "or", "and", "if", "in", "is", "not"};
    return std::none_of(std::begin(kStops), std::end(kStops), [&](const char* s) { return t.text == s; });
  }
  return t.type == Type::kString || t.type == Type::kInteger || t.type == Type::kFloat ||
         (t.type == Type::kOperator && (t.text == "[" || t.text == "{"));
}

// After '(': positional and keyword arguments up to ')'.
void ExpressionParser::parse_arguments(Expr& call) {
  while (!accept_operator(")")) {
    if (at_operator("*") || at_operator("**")) fail("*args and **kwargs in calls are not supported");
    if (peek().type == Type::kName && at_operator("=", 1)) {
      std::string name = next().text;
      ++i_;
      call.keywords.emplace_back(std::move(name), parse_expression());
    } else {
      call.items.push_back(parse_expression());
    }
    if (!at_operator(")")) expect_operator(",");
  }
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr e) {
  while (true) {
    if (at_operator(".")) {
      ++i_;
      if (peek().type == Type::kInteger) {  // x.0 is x[0]
        auto index = make(Expr::Kind::kIndex, peek().line);
        auto literal = make(Expr::Kind::kLiteral, peek().line);
        literal->value = Value(static_cast<int64_t>(std::stoll(next().text)));
        index->a = std::move(e);
        index->b = std::move(literal);
        e = std::move(index);
        continue;
      }
      auto attribute = make(Expr::Kind::kAttribute, peek().line);
      attribute->name = expect_name();
      attribute->a = std::move(e);
      e = std::move(attribute);
    } else if (at_operator("[")) {
      const size_t line = next().line;
      ExprPtr parts[3];
      int colons = 0;
      while (!at_operator("]")) {
        if (accept_operator(":")) {
          if (++colons > 2) fail("a slice has at most two ':'");
          continue;
        }
        if (parts[colons]) fail("expected ':' or ']' in a subscript");
        parts[colons] = parse_expression();
      }
      ++i_;
      if (colons == 0) {
        if (!parts[0]) fail("an empty subscript");
        auto index = make(Expr::Kind::kIndex, line);
        index->a = std::move(e);
        index->b = std::move(parts[0]);
        e = std::move(index);
      } else {
        auto slice = make(Expr::Kind::kSlice, line);
        slice->items.push_back(std::move(e));
        for (ExprPtr& part : parts) slice->items.push_back(std::move(part));
        e = std::move(slice);
      }
    } else if (at_operator("(")) {
      auto call = make(Expr::Kind::kCall, next().line);
      parse_arguments(*call);
      call->a = std::move(e);
      e = std::move(call);
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& t = peek();
  const size_t line = t.line;
  switch (t.type) {
    case Type::kName: {
      ++i_;
      auto e = make(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->value = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      return e;
    }
    case Type::kString: {
      std::string s;
      while (peek().type == Type::kString) s += next().text;  // adjacent literals join
      auto e = make(Expr::Kind::kLiteral, line);
      e->value = Value(std::move(s));
      return e;
    }
    case Type::kInteger: {
      auto e = make(Expr::Kind::kLiteral, line);
      int64_t v = 0;
      const std::string& digits = next().text;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc()) fail(fmt::format("the integer {} is out of range", digits));
      e->value = Value(v);
      return e;
    }
    case Type::kFloat: {
      auto e = make(Expr::Kind::kLiteral, line);
      e->value = Value(std::stod(next().text));
      return e;
    }
    case Type::kOperator:
      if (accept_operator("(")) {
        if (accept_operator(")")) return make(Expr::Kind::kTuple, line);
        ExprPtr first = parse_expression();
        if (accept_operator(")")) return first;
        auto tuple = make(Expr::Kind::kTuple, line);
        tuple->items.push_back(std::move(first));
        while (accept_operator(",")) {
          if (at_operator(")")) break;
          tuple->items.push_back(parse_expression());
        }
        expect_operator(")");
        return tuple;
      }
      if (accept_operator("[")) {
        auto list = make(Expr::Kind::kList, line);
        while (!accept_operator("]")) {
          list->items.push_back(parse_expression());
          if (!at_operator("]")) expect_operator(",");
        }
        return list;
      }
      if (accept_operator("{")) {
        auto dict = make(Expr::Kind::kDict, line);
        while (!accept_operator("}")) {
          dict->items.push_back(parse_expression());
          expect_operator(":");
          dict->items.push_back(parse_expression());
          if (!at_operator("}")) expect_operator(",");
        }
        return dict;
      }
      break;
    default: break;
  }
  fail(fmt::format("unexpected '{}'", describe(t)));
}

}  // namespace kvs::jinja
