// The two JSON tokens that take more than a fixed literal to read, as byte-at-a-time lexers shared by JSON mode's
// recognizer (json_machine.h) and structured outputs' schema machine (schema_machine.h): a string's bytes after its
// opening quote, and a number. Each is a small value, copied with the machine that holds it.
//
// Strings are what a strict parser accepts: valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF),
// no raw control characters (nor DEL), the eight one-letter escapes and \uXXXX, where a high surrogate must be
// followed by a low one (\uD83D\uDE00) and a low one alone is refused (nlohmann and most parsers refuse lone
// surrogates). Characters are counted as code points (a surrogate pair is one), for minLength/maxLength.
// Numbers are RFC 8259 numbers with at most max_digits digits and exponents of at most two digits (1e99: 1e400
// would overflow parsers); integers (JSON Schema "integer") are an optional '-' and digits without a leading zero.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvs {

class JsonStringLexer {
 public:
  enum class Step : uint8_t { kRefused, kMore, kClosed };
  static constexpr uint32_t kNoLimit = UINT32_MAX;

  JsonStringLexer() = default;
  // min_chars/max_chars: the string's length in code points must end within them.
  JsonStringLexer(uint32_t min_chars, uint32_t max_chars) : min_chars_(min_chars), max_chars_(max_chars) {}

  // Reads one byte of the string (after the opening quote): kClosed at the closing quote. After kRefused the lexer
  // is in no defined state (its holder restores a copy).
  Step step(uint8_t c);
  // Between characters, no escape or multi-byte character open: a byte 0x20..0x7e other than '"' and '\' is a
  // character of its own (plain tokens continue the string; with a maximum length they count towards it).
  bool between_characters() const { return mode_ == Mode::kChars && utf8_left_ == 0 && !need_low_surrogate_; }
  // How many more characters the maximum length allows (kNoLimit: any).
  uint32_t room() const { return max_chars_ == kNoLimit ? kNoLimit : max_chars_ - chars_; }
  // The fewest bytes that close the string, the closing quote included.
  size_t completion_length() const;

 private:
  enum class Mode : uint8_t { kChars, kEscape, kUnicode };
  bool start_character();  // counts a new character; false at the maximum length

  Mode mode_ = Mode::kChars;
  uint8_t utf8_left_ = 0;    // continuation bytes still due in a multi-byte character
  uint8_t utf8_low_ = 0x80;  // the allowed range of the next continuation byte (overlong and surrogate checks)
  uint8_t utf8_high_ = 0xbf;
  uint8_t hex_left_ = 0;             // \uXXXX digits still due
  bool need_low_surrogate_ = false;  // a \uD800-\uDBFF escape was read: \uDC00-\uDFFF must follow
  uint16_t code_ = 0;                // the \u escape's value so far
  uint32_t chars_ = 0;
  uint32_t min_chars_ = 0, max_chars_ = kNoLimit;
};

class JsonNumberLexer {
 public:
  enum class Step : uint8_t { kRefused, kMore, kEnded };  // kEnded: the number ended before this byte (not read)

  JsonNumberLexer() = default;
  JsonNumberLexer(bool integer, uint8_t max_digits) : integer_(integer), max_digits_(max_digits) {}

  // Reads the number's first byte ('-' or a digit); false for any other.
  bool start(uint8_t c);
  Step step(uint8_t c);
  // What was read is a whole number.
  bool can_end() const;
  size_t completion_length() const { return can_end() ? 0 : 1; }

 private:
  enum class Part : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };
  static constexpr uint8_t kMaxExponentDigits = 2;

  Part part_ = Part::kInt;
  bool integer_ = false;
  uint8_t max_digits_ = 64;
  uint8_t digits_ = 0, exponent_digits_ = 0;
};

}  // namespace kvs
