// A Jinja template's source as tokens: text between tags (whitespace control applied: '-' on a tag strips the
// whitespace beside it; as Hugging Face renders chat templates, trim_blocks drops the newline after a block or
// comment tag and lstrip_blocks the indentation before one; '+' turns either off for a tag), the tags' delimiters,
// and inside tags names, literals and operators. Comments are dropped; {% raw %} ... {% endraw %} is text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::jinja {

struct Token {
  enum class Type {
    kText,
    kExpressionStart,
    kExpressionEnd,
    kStatementStart,
    kStatementEnd,
    kName,
    kString,
    kInteger,
    kFloat,
    kOperator,
    kEnd
  };
  Type type;
  std::string text;  // text, a name, a string literal's value, a number's digits, an operator
  size_t line = 1;
};

// Throws TemplateError (value.h) naming the line of a malformed tag or literal.
std::vector<Token> tokenize(std::string_view source);

}  // namespace kvs::jinja
