#include "jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/utf8.h"
#include "jinja/value.h"

namespace kvs::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

constexpr int kMaxBrackets = 200;  // the parser recurses per bracket: bounded, as the template is untrusted

class Lexer {
 public:
  // Newlines are normalized to '\n' and one at the very end is dropped, as Jinja does (keep_trailing_newline off).
  explicit Lexer(std::string_view source) {
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        source_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        source_.push_back(source[i]);
      }
    }
    if (!source_.empty() && source_.back() == '\n') source_.pop_back();
    src_ = source_;
  }

  std::vector<Token> run() {
    bool strip_next_text = false;  // the previous tag ended with '-'
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text(src_.substr(pos_, tag - pos_));
      const size_t text_start = pos_;
      if (strip_next_text) text.erase(0, leading_space(text));
      strip_next_text = false;
      if (tag == src_.size()) {
        add_text(std::move(text));
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool block = kind == '%' || kind == '#';
      if (marker == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (block && marker != '+') {
        lstrip_block(text, text_start, tag);
      }
      add_text(std::move(text));
      pos_ = tag + 2 + (marker == '-' || marker == '+' ? 1 : 0);
      bool strip_after = false, keep_newline = false;
      if (kind == '#') {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string_view::npos) fail("a comment is not closed with '#}'");
        strip_after = end > pos_ && src_[end - 1] == '-';
        keep_newline = end > pos_ && src_[end - 1] == '+';
        count_lines(pos_, end + 2);
        pos_ = end + 2;
      } else if (kind == '%' && is_raw()) {
        read_raw();
        continue;
      } else {
        const std::string_view close = kind == '%' ? "%}" : "}}";
        tokens_.push_back({kind == '%' ? Token::Type::kStatementStart : Token::Type::kExpressionStart, "", line_});
        read_inside(close, strip_after, keep_newline);
        tokens_.push_back({kind == '%' ? Token::Type::kStatementEnd : Token::Type::kExpressionEnd, "", line_});
      }
      if (strip_after) {
        strip_next_text = true;
      } else if (block && !keep_newline) {  // trim_blocks: the newline after a block or comment tag
        if (pos_ < src_.size() && src_[pos_] == '\n') {
          ++pos_;
          ++line_;
        }
      }
    }
    tokens_.push_back({Token::Type::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(fmt::format("template syntax error at line {}: {}", line_, what));
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  static size_t leading_space(const std::string& s) {
    size_t n = 0;
    while (n < s.size() && is_space(s[n])) ++n;
    return n;
  }

  // lstrip_blocks: spaces and tabs from the start of the line up to the tag go.
  void lstrip_block(std::string& text, size_t text_start, size_t tag) const {
    size_t i = tag;
    while (i > text_start && (src_[i - 1] == ' ' || src_[i - 1] == '\t')) --i;
    if (i > 0 && src_[i - 1] != '\n') return;  // something else is on the line before the tag
    text.resize(text.size() - std::min(text.size(), tag - i));
  }

  void add_text(std::string text) {
    const size_t newlines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    if (!text.empty()) tokens_.push_back({Token::Type::kText, std::move(text), line_});
    line_ += newlines;
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  bool is_raw() const {
    size_t i = pos_;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (src_.substr(i, 3) != "raw") return false;
    i += 3;
    while (i < src_.size() && is_space(src_[i])) ++i;
    return src_.substr(i, 2) == "%}" || src_.substr(i, 3) == "-%}";
  }

  void read_raw() {
    const size_t body = src_.find("%}", pos_) + 2;
    size_t at = body;
    while (true) {
      const size_t tag = src_.find("{%", at);
      if (tag == std::string_view::npos) fail("{% raw %} is not closed with {% endraw %}");
      size_t i = tag + 2;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (src_.substr(i, 6) == "endraw") {
        add_text(std::string(src_.substr(body, tag - body)));
        pos_ = src_.find("%}", i) + 2;
        return;
      }
      at = tag + 2;
    }
  }

  // The tokens inside a tag, up to its closing delimiter (outside brackets: a dict literal may hold "}}").
  void read_inside(std::string_view close, bool& strip_after, bool& keep_newline) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) fail(fmt::format("a tag is not closed with '{}'", close));
      if (depth == 0) {
        if (src_.substr(pos_, close.size()) == close) {
          pos_ += close.size();
          return;
        }
        if ((src_[pos_] == '-' || src_[pos_] == '+') && src_.substr(pos_ + 1, close.size()) == close) {
          strip_after = src_[pos_] == '-';
          keep_newline = src_[pos_] == '+';
          pos_ += 1 + close.size();
          return;
        }
      }
      const char c = src_[pos_];
      if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && (is_name_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
        tokens_.push_back({Token::Type::kName, std::string(src_.substr(start, pos_ - start)), line_});
      } else if (is_digit(c)) {
        read_number();
      } else if (c == '\'' || c == '"') {
        read_string(c);
      } else {
        static const char* const kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* two : kTwo)
          if (src_.substr(pos_, 2) == two) op = two;
        if (op.size() == 1 && !std::strchr("+-*/%~<>=()[]{},.:|", c)) fail(fmt::format("unexpected character '{}'", c));
        if ((op == "(" || op == "[" || op == "{") && ++depth > kMaxBrackets)
          fail(fmt::format("brackets nest deeper than {}", kMaxBrackets));
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        tokens_.push_back({Token::Type::kOperator, op, line_});
      }
    }
  }

  void read_number() {
    const size_t start = pos_;
    bool is_float = false;
    while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t i = pos_ + 1;
      if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
      if (i < src_.size() && is_digit(src_[i])) {
        is_float = true;
        pos_ = i;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    std::string digits;
    for (char ch : src_.substr(start, pos_ - start))
      if (ch != '_') digits += ch;
    tokens_.push_back({is_float ? Token::Type::kFloat : Token::Type::kInteger, digits, line_});
  }

  // A string literal with Python's escapes (\n, \t, \\, \', \", \xNN, \uNNNN, \UNNNNNNNN).
  void read_string(char quote) {
    std::string value;
    ++pos_;
    while (true) {
      if (pos_ >= src_.size()) fail("a string literal is not closed");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail("a string literal is not closed");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '0': value += '\0'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': ++line_; break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) fail("a truncated escape in a string literal");
          const std::string hex(src_.substr(pos_, n));
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(fmt::format("a bad escape '\\{}{}' in a string literal", e, hex));
          const auto code_point = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
          if (code_point > 0x10ffff) fail(fmt::format("the escape '\\{}{}' is past U+10FFFF", e, hex));
          utf8::append(value, code_point);
          pos_ += n;
          break;
        }
        default:  // Python keeps unknown escapes as they are
          value += '\\';
          value += e;
      }
    }
    tokens_.push_back({Token::Type::kString, std::move(value), line_});
  }

  std::string source_;
  std::string_view src_;
  size_t pos_ = 0;
  size_t line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace kvs::jinja
