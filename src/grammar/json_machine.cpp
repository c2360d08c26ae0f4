#include "grammar/json_machine.h"

#include <string>

namespace kvs {
namespace {

bool is_whitespace(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonMachine::feed(uint8_t c) {
  const JsonMachine before = *this;
  if (step(c)) return true;
  *this = before;
  return false;
}

bool JsonMachine::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

size_t JsonMachine::completion_length() const {
  const size_t closers = depth_;  // one '}' or ']' per open container
  const size_t after_key = 2;     // ':' and a one-digit value
  switch (mode_) {
    case Mode::kDone: return 0;
    case Mode::kValue:
      if (depth_ == 0) return object_only_ ? 2 : 1;  // "{}" or "0"
      return (empty_array_ ? 0 : 1) + closers;       // a value, unless an array may close empty
    case Mode::kFirstKeyOrEnd: return closers;
    case Mode::kKey: return 2 + after_key + closers;  // "":0
    case Mode::kColon: return after_key + closers;
    case Mode::kAfterValue: return closers;
    case Mode::kString: return utf8_left_ + 1 + (key_ ? after_key : 0) + closers;
    case Mode::kEscape: return 2 + (key_ ? after_key : 0) + closers;
    case Mode::kUnicode: return hex_left_ + 1 + (key_ ? after_key : 0) + closers;
    case Mode::kNumber: return (number_can_end() ? 0 : 1) + closers;
    case Mode::kLiteral: return std::char_traits<char>::length(literal_) - literal_at_ + closers;
  }
  return closers;
}

bool JsonMachine::whitespace() {
  if (whitespace_run_ >= kMaxWhitespaceRun) return false;
  ++whitespace_run_;
  return true;
}

bool JsonMachine::number_can_end() const {
  return number_ == Number::kZero || number_ == Number::kInt || number_ == Number::kFrac ||
         number_ == Number::kExpDigits;
}

void JsonMachine::end_value() {
  whitespace_run_ = 0;
  mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
}

bool JsonMachine::start_value(uint8_t c) {
  whitespace_run_ = 0;
  if (depth_ == 0 && object_only_ && c != '{') return false;
  switch (c) {
    case '{':
    case '[':
      if (depth_ == kMaxDepth) return false;
      stack_[depth_++] = c;
      mode_ = c == '{' ? Mode::kFirstKeyOrEnd : Mode::kValue;
      if (c == '[') key_ = false;
      return true;
    case '"':
      key_ = false;
      mode_ = Mode::kString;
      return true;
    case '-':
      mode_ = Mode::kNumber;
      number_ = Number::kMinus;
      number_digits_ = exponent_digits_ = 0;
      return true;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::kLiteral;
      literal_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
      literal_at_ = 1;
      return true;
    default:
      if (!is_digit(c)) return false;
      mode_ = Mode::kNumber;
      number_ = c == '0' ? Number::kZero : Number::kInt;
      number_digits_ = 1;
      exponent_digits_ = 0;
      return true;
  }
}

bool JsonMachine::step(uint8_t c) {
  switch (mode_) {
    case Mode::kValue:
      if (is_whitespace(c)) return whitespace();
      // ']' closes an empty array: only right after its '[' (the previous byte left kValue with a fresh array).
      if (c == ']' && depth_ > 0 && stack_[depth_ - 1] == '[' && empty_array_) {
        --depth_;
        empty_array_ = false;
        end_value();
        return true;
      }
      empty_array_ = false;
      if (!start_value(c)) return false;
      if (c == '[') empty_array_ = true;
      return true;
    case Mode::kFirstKeyOrEnd:
    case Mode::kKey:
      if (is_whitespace(c)) return whitespace();
      whitespace_run_ = 0;
      if (c == '}' && mode_ == Mode::kFirstKeyOrEnd) {
        --depth_;
        end_value();
        return true;
      }
      if (c != '"') return false;
      key_ = true;
      mode_ = Mode::kString;
      return true;
    case Mode::kColon:
      if (is_whitespace(c)) return whitespace();
      if (c != ':') return false;
      whitespace_run_ = 0;
      mode_ = Mode::kValue;
      return true;
    case Mode::kAfterValue:
      if (is_whitespace(c)) return whitespace();
      whitespace_run_ = 0;
      if (c == ',') {
        mode_ = stack_[depth_ - 1] == '{' ? Mode::kKey : Mode::kValue;
        return true;
      }
      if (c == (stack_[depth_ - 1] == '{' ? '}' : ']')) {
        --depth_;
        end_value();
        return true;
      }
      return false;
    case Mode::kString:
      if (utf8_left_ > 0) {
        if (c < utf8_low_ || c > utf8_high_) return false;
        --utf8_left_;
        utf8_low_ = 0x80;
        utf8_high_ = 0xbf;
        return true;
      }
      if (c == '"') {
        if (key_) {
          key_ = false;
          whitespace_run_ = 0;
          mode_ = Mode::kColon;
        } else {
          end_value();
        }
        return true;
      }
      if (c == '\\') {
        mode_ = Mode::kEscape;
        return true;
      }
      if (c < 0x20 || c == 0x7f) return false;  // control characters must be escaped (DEL: kept out too)
      if (c < 0x80) return true;
      // UTF-8 lead bytes (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
      if (c >= 0xc2 && c <= 0xdf) {
        utf8_left_ = 1;
      } else if (c >= 0xe0 && c <= 0xef) {
        utf8_left_ = 2;
        if (c == 0xe0) utf8_low_ = 0xa0;
        if (c == 0xed) utf8_high_ = 0x9f;
      } else if (c >= 0xf0 && c <= 0xf4) {
        utf8_left_ = 3;
        if (c == 0xf0) utf8_low_ = 0x90;
        if (c == 0xf4) utf8_high_ = 0x8f;
      } else {
        return false;
      }
      return true;
    case Mode::kEscape:
      if (c == 'u') {
        hex_left_ = 4;
        mode_ = Mode::kUnicode;
        return true;
      }
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') return false;
      mode_ = Mode::kString;
      return true;
    case Mode::kUnicode:
      if (!is_hex(c)) return false;
      if (--hex_left_ == 0) mode_ = Mode::kString;
      return true;
    case Mode::kNumber:
      if (is_digit(c)) {  // the limits on digits: finite doubles, finite output
        const bool exponent = number_ == Number::kExp || number_ == Number::kExpSign || number_ == Number::kExpDigits;
        if (exponent ? ++exponent_digits_ > kMaxExponentDigits : ++number_digits_ > kMaxNumberDigits) return false;
      }
      switch (number_) {
        case Number::kMinus:
          if (!is_digit(c)) return false;
          number_ = c == '0' ? Number::kZero : Number::kInt;
          return true;
        case Number::kInt:
          if (is_digit(c)) return true;
          [[fallthrough]];
        case Number::kZero:
          if (c == '.') {
            number_ = Number::kDot;
            return true;
          }
          if (c == 'e' || c == 'E') {
            number_ = Number::kExp;
            return true;
          }
          break;
        case Number::kDot:
          if (!is_digit(c)) return false;
          number_ = Number::kFrac;
          return true;
        case Number::kFrac:
          if (is_digit(c)) return true;
          if (c == 'e' || c == 'E') {
            number_ = Number::kExp;
            return true;
          }
          break;
        case Number::kExp:
          if (c == '+' || c == '-') {
            number_ = Number::kExpSign;
            return true;
          }
          [[fallthrough]];
        case Number::kExpSign:
          if (!is_digit(c)) return false;
          number_ = Number::kExpDigits;
          return true;
        case Number::kExpDigits:
          if (is_digit(c)) return true;
          break;
      }
      // The number ended before c (numbers are never at the top level of an object document).
      if (!number_can_end()) return false;
      end_value();
      return step(c);
    case Mode::kLiteral:
      if (static_cast<uint8_t>(literal_[literal_at_]) != c) return false;
      if (literal_[++literal_at_] == '\0') end_value();
      return true;
    case Mode::kDone: return is_whitespace(c) && whitespace();
  }
  return false;
}

}  // namespace kvs
