// Jinja's expressions over the lexer's tokens (lexer.h), with Python's precedence: conditional expressions, or, and,
// not, comparisons and in, + -, ~, * / // %, **, unary -, then filters, tests and calls on values; literals,
// names, lists, tuples, dicts, attributes, indexes and slices. The statement parser (parser.cpp) builds on it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kvs::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

 protected:
  // Token helpers; fail throws TemplateError naming the line.
  [[noreturn]] void fail(const std::string& what) const;
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == Token::Type::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == Token::Type::kName && peek(ahead).text == name;
  }
  bool accept_operator(std::string_view op);
  bool accept_name(std::string_view name);
  void expect_operator(std::string_view op);
  std::string expect_name();
  static std::string describe(const Token& t);
  static ExprPtr make(Expr::Kind kind, size_t line);

  ExprPtr parse_expression();           // with conditional expressions
  ExprPtr parse_or();                   // without them (a for loop's iterable, before its 'if')
  ExprPtr parse_tuple_or_expression();  // a, b (a set's value)
  ExprPtr parse_filter_chain(ExprPtr e);
  void parse_arguments(Expr& call);  // after '(': positional and keyword arguments up to ')'

  std::vector<Token> t_;
  size_t i_ = 0;

 private:
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(ExprPtr left, std::string op, ExprPtr right);
  ExprPtr parse_add();
  ExprPtr parse_concat();
  ExprPtr parse_multiply();
  ExprPtr parse_power();
  ExprPtr parse_unary(bool with_filters);
  bool starts_test_argument() const;
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_primary();
};

}  // namespace kvs::jinja
