#include "grammar/json_lexers.h"

namespace kvs {
namespace {

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

// A hex digit's value, or -1.
int hex_value(uint8_t c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_high_surrogate(uint32_t code) { return code >= 0xd800 && code <= 0xdbff; }

}  // namespace

bool JsonStringLexer::start_character() {
  if (chars_ >= max_chars_) return false;
  ++chars_;
  return true;
}

size_t JsonStringLexer::completion_length() const {
  const size_t short_by = chars_ < min_chars_ ? min_chars_ - chars_ : 0;  // one-byte characters still due
  const size_t close = short_by + 1;                                      // and the quote
  const size_t low_escape = 6;                                            // \uDC00
  switch (mode_) {
    case Mode::kChars: return utf8_left_ + (need_low_surrogate_ ? low_escape : 0) + close;
    case Mode::kEscape: return (need_low_surrogate_ ? low_escape - 1 : 1) + close;
    case Mode::kUnicode: {
      // After two digits a high surrogate is known (\uD8..\uDB): its low half is due too.
      const bool high = !need_low_surrogate_ && hex_left_ <= 2 && is_high_surrogate(uint32_t{code_} << (4 * hex_left_));
      return hex_left_ + (high ? low_escape : 0) + close;
    }
  }
  return close;
}

JsonStringLexer::Step JsonStringLexer::step(uint8_t c) {
  switch (mode_) {
    case Mode::kChars:
      if (utf8_left_ > 0) {
        if (c < utf8_low_ || c > utf8_high_) return Step::kRefused;
        --utf8_left_;
        utf8_low_ = 0x80;
        utf8_high_ = 0xbf;
        return Step::kMore;
      }
      if (need_low_surrogate_) {  // only the low half's escape may follow a high one
        if (c != '\\') return Step::kRefused;
        mode_ = Mode::kEscape;
        return Step::kMore;
      }
      if (c == '"') return chars_ >= min_chars_ ? Step::kClosed : Step::kRefused;
      if (c < 0x20 || c == 0x7f) return Step::kRefused;  // control characters must be escaped (DEL: kept out too)
      if (c >= 0x80) {                                   // UTF-8 lead bytes (RFC 3629)
        if (c >= 0xc2 && c <= 0xdf) {
          utf8_left_ = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
          utf8_left_ = 2;
          if (c == 0xe0) utf8_low_ = 0xa0;   // no overlong forms
          if (c == 0xed) utf8_high_ = 0x9f;  // no surrogates
        } else if (c >= 0xf0 && c <= 0xf4) {
          utf8_left_ = 3;
          if (c == 0xf0) utf8_low_ = 0x90;
          if (c == 0xf4) utf8_high_ = 0x8f;  // nothing past U+10FFFF
        } else {
          return Step::kRefused;
        }
      }
      if (!start_character()) return Step::kRefused;
      if (c == '\\') mode_ = Mode::kEscape;
      return Step::kMore;
    case Mode::kEscape:
      if (c == 'u') {
        hex_left_ = 4;
        code_ = 0;
        mode_ = Mode::kUnicode;
        return Step::kMore;
      }
      if (need_low_surrogate_) return Step::kRefused;
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't')
        return Step::kRefused;
      mode_ = Mode::kChars;
      return Step::kMore;
    case Mode::kUnicode: {
      const int digit = hex_value(c);
      if (digit < 0) return Step::kRefused;
      const int at = 4 - hex_left_;  // which digit this is
      if (need_low_surrogate_) {     // \uDC00-\uDFFF
        if ((at == 0 && digit != 0xd) || (at == 1 && digit < 0xc)) return Step::kRefused;
      } else if (at == 1 && code_ == 0xd && digit >= 0xc) {
        return Step::kRefused;  // a low surrogate alone
      }
      code_ = static_cast<uint16_t>(code_ * 16 + digit);
      if (--hex_left_ == 0) {
        mode_ = Mode::kChars;
        need_low_surrogate_ = !need_low_surrogate_ && is_high_surrogate(code_);
      }
      return Step::kMore;
    }
  }
  return Step::kRefused;
}

bool JsonNumberLexer::start(uint8_t c) {
  digits_ = exponent_digits_ = 0;
  if (c == '-') {
    part_ = Part::kMinus;
    return true;
  }
  if (!is_digit(c)) return false;
  part_ = c == '0' ? Part::kZero : Part::kInt;
  digits_ = 1;
  return true;
}

bool JsonNumberLexer::can_end() const {
  return part_ == Part::kZero || part_ == Part::kInt || part_ == Part::kFrac || part_ == Part::kExpDigits;
}

JsonNumberLexer::Step JsonNumberLexer::step(uint8_t c) {
  const auto ended = [this] { return can_end() ? Step::kEnded : Step::kRefused; };
  if (is_digit(c)) {  // the limits on digits: finite doubles (and int64 integers), finite output
    const bool exponent = part_ == Part::kExp || part_ == Part::kExpSign || part_ == Part::kExpDigits;
    if (exponent ? exponent_digits_ >= kMaxExponentDigits : (part_ != Part::kZero && digits_ >= max_digits_))
      return Step::kRefused;
  }
  const bool fraction_or_exponent = !integer_ && (c == '.' || c == 'e' || c == 'E');
  switch (part_) {
    case Part::kMinus:
      if (!is_digit(c)) return Step::kRefused;
      part_ = c == '0' ? Part::kZero : Part::kInt;
      ++digits_;
      return Step::kMore;
    case Part::kInt:
      if (is_digit(c)) {
        ++digits_;
        return Step::kMore;
      }
      [[fallthrough]];
    case Part::kZero:
      if (!fraction_or_exponent) return ended();  // after a leading zero a digit ends the number (and is refused)
      part_ = c == '.' ? Part::kDot : Part::kExp;
      return Step::kMore;
    case Part::kDot:
      if (!is_digit(c)) return Step::kRefused;
      ++digits_;
      part_ = Part::kFrac;
      return Step::kMore;
    case Part::kFrac:
      if (is_digit(c)) {
        ++digits_;
        return Step::kMore;
      }
      if (c != 'e' && c != 'E') return ended();
      part_ = Part::kExp;
      return Step::kMore;
    case Part::kExp:
      if (c == '+' || c == '-') {
        part_ = Part::kExpSign;
        return Step::kMore;
      }
      [[fallthrough]];
    case Part::kExpSign:
      if (!is_digit(c)) return Step::kRefused;
      ++exponent_digits_;
      part_ = Part::kExpDigits;
      return Step::kMore;
    case Part::kExpDigits:
      if (!is_digit(c)) return ended();
      ++exponent_digits_;
      return Step::kMore;
  }
  return Step::kRefused;
}

}  // namespace kvs
