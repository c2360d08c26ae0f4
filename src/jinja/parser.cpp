#include "jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include "jinja/expression_parser.h"

namespace kvs::jinja {
namespace {

using Type = Token::Type;

class Parser : public ExpressionParser {
 public:
  explicit Parser(std::vector<Token> tokens) : ExpressionParser(std::move(tokens)) {}

  Body parse() {
    std::string ender;
    Body body = parse_body({}, ender);
    if (!ender.empty()) fail(fmt::format("'{}' without its opening tag", ender));
    return body;
  }

 private:
  void expect_statement_end() {
    if (peek().type != Type::kStatementEnd) fail(fmt::format("expected '%}}', found '{}'", describe(peek())));
    ++i_;
  }
  NodePtr make_node(Node::Kind kind) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = peek().line;
    return n;
  }

  // Statements and text up to a {% tag %} named in `enders` (left after its name; `ender` says which) or the end.
  Body parse_body(std::initializer_list<std::string_view> enders, std::string& ender) {
    if (++depth_ > kMaxBlockDepth) fail(fmt::format("blocks nest deeper than {}", kMaxBlockDepth));
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
          --depth_;
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

  // One {% tag ... %} after its '{%': the node it makes goes to `body`.
  void parse_statement(Body& body) {
    const std::string keyword = expect_name();
    if (keyword == "if") {
      body.push_back(parse_if());
    } else if (keyword == "for") {
      body.push_back(parse_for());
    } else if (keyword == "set") {
      body.push_back(parse_set());
    } else if (keyword == "macro") {
      body.push_back(parse_macro());
    } else if (keyword == "call") {
      body.push_back(parse_call_block());
    } else if (keyword == "filter") {
      body.push_back(parse_filter_block());
    } else if (keyword == "break" || keyword == "continue") {
      body.push_back(make_node(keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue));
      expect_statement_end();
    } else if (keyword == "generation") {  // Hugging Face's assistant-mask marker: transparent
      expect_statement_end();
      std::string ender;
      for (NodePtr& inner : parse_body({"endgeneration"}, ender)) body.push_back(std::move(inner));
      expect_statement_end();
    } else if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
      fail(fmt::format("'{}' without its opening tag", keyword));
    } else {
      fail(fmt::format("unknown or unsupported tag '{}'", keyword));
    }
  }

  // The statement's end, its body up to {% `ender` %} and that tag's end.
  Body parse_block_body(std::string_view ender_name) {
    expect_statement_end();
    std::string ender;
    Body body = parse_body({ender_name}, ender);
    expect_statement_end();
    return body;
  }

  NodePtr parse_if() {
    auto n = make_node(Node::Kind::kIf);
    ExprPtr condition = parse_expression();
    std::string ender;
    while (true) {
      expect_statement_end();
      Body branch = parse_body({"elif", "else", "endif"}, ender);
      n->branches.emplace_back(std::move(condition), std::move(branch));
      if (ender != "elif") break;
      condition = parse_expression();
    }
    if (ender == "else")
      n->otherwise = parse_block_body("endif");
    else
      expect_statement_end();
    return n;
  }

  NodePtr parse_for() {
    auto n = make_node(Node::Kind::kFor);
    n->targets.push_back(expect_name());
    while (accept_operator(",")) n->targets.push_back(expect_name());
    if (!accept_name("in")) fail("expected 'in' in a for loop");
    n->expr = parse_or();  // (an 'if' here filters the loop)
    if (accept_name("if")) n->condition = parse_or();
    if (at_name("recursive")) fail("recursive for loops are not supported");
    expect_statement_end();
    std::string ender;
    n->body = parse_body({"else", "endfor"}, ender);
    if (ender == "else")
      n->otherwise = parse_block_body("endfor");
    else
      expect_statement_end();
    return n;
  }

  NodePtr parse_set() {
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
      n->body = parse_block_body("endset");
    }
    return n;
  }

  NodePtr parse_macro() {
    auto n = make_node(Node::Kind::kMacro);
    n->text = expect_name();
    expect_operator("(");
    while (!accept_operator(")")) {
      std::string name = expect_name();
      ExprPtr fallback = accept_operator("=") ? parse_expression() : nullptr;
      n->parameters.emplace_back(std::move(name), std::move(fallback));
      if (!at_operator(")")) expect_operator(",");
    }
    n->body = parse_block_body("endmacro");
    return n;
  }

  NodePtr parse_call_block() {
    auto n = make_node(Node::Kind::kCallBlock);
    if (at_operator("(")) fail("call blocks with caller parameters are not supported");
    n->expr = parse_expression();
    n->body = parse_block_body("endcall");
    return n;
  }

  NodePtr parse_filter_block() {
    auto n = make_node(Node::Kind::kFilterBlock);
    auto filter = make(Expr::Kind::kFilter, n->line);
    filter->a = make(Expr::Kind::kLiteral, n->line);  // the body's text goes here when rendered
    filter->name = expect_name();
    if (accept_operator("(")) parse_arguments(*filter);
    n->expr = parse_filter_chain(std::move(filter));
    n->body = parse_block_body("endfilter");
    return n;
  }

  static constexpr int kMaxBlockDepth = 200;  // parse_body recurses per block: bounded, as the template is untrusted
  int depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace kvs::jinja
