#include "template/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include "template/lexer.h"

namespace kvs::jinja {
namespace {

using Type = Token::Type;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse() {
    std::string ender;
    Body body = parse_body({}, ender);
    if (!ender.empty()) fail(fmt::format("'{}' without its opening tag", ender));
    return body;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(fmt::format("template syntax error at line {}: {}", peek().line, what));
  }
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == Type::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == Type::kName && peek(ahead).text == name;
  }
  bool accept_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    ++i_;
    return true;
  }
  void expect_operator(std::string_view op) {
    if (!accept_operator(op)) fail(fmt::format("expected '{}', found '{}'", op, describe(peek())));
  }
  std::string expect_name() {
    if (peek().type != Type::kName) fail(fmt::format("expected a name, found '{}'", describe(peek())));
    return next().text;
  }
  void expect_statement_end() {
    if (peek().type != Type::kStatementEnd) fail(fmt::format("expected '%}}', found '{}'", describe(peek())));
    ++i_;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Type::kEnd: return "the end of the template";
      case Type::kStatementEnd: return "%}";
      case Type::kExpressionEnd: return "}}";
      case Type::kText: return "text";
      default: return t.text;
    }
  }

  ExprPtr make(Expr::Kind kind, size_t line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  NodePtr make_node(Node::Kind kind) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = peek().line;
    return n;
  }

  // Statements and text up to a {% tag %} named in `enders` (left after its name; `ender` says which) or the end.
  Body parse_body(std::initializer_list<std::string_view> enders, std::string& ender) {
    Body body;
    ender.clear();
    while (peek().type != Type::kEnd) {
      const Token& t = peek();
      if (t.type == Type::kText) {
        auto n = make_node(Node::Kind::kText);
        n->text = next().text;
        body.push_back(std::move(n));
      } else if (t.type == Type::kExpressionStart) {
        ++i_;
        auto n = make_node(Node::Kind::kOutput);
        n->expr = parse_expression();
        if (peek().type != Type::kExpressionEnd) fail(fmt::format("expected '}}}}', found '{}'", describe(peek())));
        ++i_;
        body.push_back(std::move(n));
      } else if (t.type == Type::kStatementStart) {
        if (peek(1).type == Type::kName && std::find(enders.begin(), enders.end(), peek(1).text) != enders.end()) {
          i_ += 2;
          ender = t_[i_ - 1].text;
          return body;
        }
        ++i_;
        parse_statement(body);
      } else {
        fail(fmt::format("unexpected '{}'", describe(t)));
      }
    }
    if (enders.size() > 0) fail(fmt::format("a block is not closed: expected '{{% {} %}}'", *(enders.end() - 1)));
    return body;
  }

  void parse_statement(Body& body) {
    const std::string keyword = expect_name();
    std::string ender;
    if (keyword == "if") {
      auto n = make_node(Node::Kind::kIf);
      ExprPtr condition = parse_expression();
      while (true) {
        expect_statement_end();
        Body branch = parse_body({"elif", "else", "endif"}, ender);
        n->branches.emplace_back(std::move(condition), std::move(branch));
        if (ender == "elif") {
          condition = parse_expression();
          continue;
        }
        if (ender == "else") {
          expect_statement_end();
          n->otherwise = parse_body({"endif"}, ender);
        }
        expect_statement_end();
        break;
      }
      body.push_back(std::move(n));
    } else if (keyword == "for") {
      auto n = make_node(Node::Kind::kFor);
      n->targets.push_back(expect_name());
      while (accept_operator(",")) n->targets.push_back(expect_name());
      if (!accept_name("in")) fail("expected 'in' in a for loop");
      n->expr = parse_or();  // (an 'if' here filters the loop)
      if (accept_name("if")) n->condition = parse_or();
      if (at_name("recursive")) fail("recursive for loops are not supported");
      expect_statement_end();
      n->body = parse_body({"else", "endfor"}, ender);
      if (ender == "else") {
        expect_statement_end();
        n->otherwise = parse_body({"endfor"}, ender);
      }
      expect_statement_end();
      body.push_back(std::move(n));
    } else if (keyword == "set") {
      auto n = make_node(Node::Kind::kSet);
      n->targets.push_back(expect_name());
      if (accept_operator(".")) {
        n->attribute = expect_name();
      } else {
        while (accept_operator(",")) n->targets.push_back(expect_name());
      }
      if (accept_operator("=")) {
        n->expr = parse_tuple_or_expression();
        expect_statement_end();
      } else {
        if (n->targets.size() != 1 || !n->attribute.empty()) fail("a block set takes one name");
        n->kind = Node::Kind::kSetBlock;
        expect_statement_end();
        n->body = parse_body({"endset"}, ender);
        expect_statement_end();
      }
      body.push_back(std::move(n));
    } else if (keyword == "macro") {
      auto n = make_node(Node::Kind::kMacro);
      n->text = expect_name();
      expect_operator("(");
      while (!accept_operator(")")) {
        std::string name = expect_name();
        ExprPtr fallback = accept_operator("=") ? parse_expression() : nullptr;
        n->parameters.emplace_back(std::move(name), std::move(fallback));
        if (!at_operator(")")) expect_operator(",");
      }
      expect_statement_end();
      n->body = parse_body({"endmacro"}, ender);
      expect_statement_end();
      body.push_back(std::move(n));
    } else if (keyword == "call") {
      auto n = make_node(Node::Kind::kCallBlock);
      if (at_operator("(")) fail("call blocks with caller parameters are not supported");
      n->expr = parse_expression();
      expect_statement_end();
      n->body = parse_body({"endcall"}, ender);
      expect_statement_end();
      body.push_back(std::move(n));
    } else if (keyword == "filter") {
      auto n = make_node(Node::Kind::kFilterBlock);
      auto filter = make(Expr::Kind::kFilter, n->line);
      filter->a = make(Expr::Kind::kLiteral, n->line);  // the body's text goes here when rendered
      filter->name = expect_name();
      if (accept_operator("(")) parse_arguments(*filter);
      n->expr = parse_filter_chain(std::move(filter));
      expect_statement_end();
      n->body = parse_body({"endfilter"}, ender);
      expect_statement_end();
      body.push_back(std::move(n));
    } else if (keyword == "break" || keyword == "continue") {
      body.push_back(make_node(keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue));
      expect_statement_end();
    } else if (keyword == "generation") {  // Hugging Face's assistant-mask marker: transparent
      expect_statement_end();
      for (NodePtr& inner : parse_body({"endgeneration"}, ender)) body.push_back(std::move(inner));
      expect_statement_end();
    } else if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
      fail(fmt::format("'{}' without its opening tag", keyword));
    } else {
      fail(fmt::format("unknown or unsupported tag '{}'", keyword));
    }
  }

  ExprPtr parse_tuple_or_expression() {
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

  ExprPtr parse_expression() {
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

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (at_name("or")) {
      auto n = make(Expr::Kind::kOr, next().line);
      n->a = std::move(e);
      n->b = parse_and();
      e = std::move(n);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (at_name("and")) {
      auto n = make(Expr::Kind::kAnd, next().line);
      n->a = std::move(e);
      n->b = parse_not();
      e = std::move(n);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      auto n = make(Expr::Kind::kNot, next().line);
      n->a = parse_not();
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr binary(ExprPtr left, std::string op, ExprPtr right) {
    auto n = make(Expr::Kind::kBinary, left->line);
    n->name = std::move(op);
    n->a = std::move(left);
    n->b = std::move(right);
    return n;
  }

  ExprPtr parse_add() {
    ExprPtr e = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      std::string op = next().text;
      e = binary(std::move(e), std::move(op), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_multiply();
    while (at_operator("~")) {
      ++i_;
      e = binary(std::move(e), "~", parse_multiply());
    }
    return e;
  }

  ExprPtr parse_multiply() {
    ExprPtr e = parse_power();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      std::string op = next().text;
      e = binary(std::move(e), std::move(op), parse_power());
    }
    return e;
  }

  ExprPtr parse_power() {
    ExprPtr e = parse_unary(true);
    while (at_operator("**")) {
      ++i_;
      e = binary(std::move(e), "**", parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filters) {
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
  ExprPtr parse_filter_chain(ExprPtr e) {
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

  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.type == Type::kName) {
      static const char* const kStops[] = {"else", "or", "and", "if", "in", "is", "not"};
      return std::none_of(std::begin(kStops), std::end(kStops), [&](const char* s) { return t.text == s; });
    }
    return t.type == Type::kString || t.type == Type::kInteger || t.type == Type::kFloat ||
           (t.type == Type::kOperator && (t.text == "[" || t.text == "{"));
  }

  // After '(': positional and keyword arguments up to ')'.
  void parse_arguments(Expr& call) {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_primary() {
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

  std::vector<Token> t_;
  size_t i_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace kvs::jinja
