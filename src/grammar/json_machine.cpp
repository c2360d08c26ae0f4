#include "grammar/json_machine.h"

#include <string>

namespace kvs {
namespace {

bool is_whitespace(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

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
    case Mode::kString: return string_.completion_length() + (key_ ? after_key : 0) + closers;
    case Mode::kNumber: return number_.completion_length() + closers;
    case Mode::kLiteral: return std::char_traits<char>::length(literal_) - literal_at_ + closers;
  }
  return closers;
}

bool JsonMachine::whitespace() {
  if (whitespace_run_ >= kMaxWhitespaceRun) return false;
  ++whitespace_run_;
  return true;
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
      string_ = JsonStringLexer();
      return true;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::kLiteral;
      literal_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
      literal_at_ = 1;
      return true;
    default:
      if (!number_.start(c)) return false;
      mode_ = Mode::kNumber;
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
      string_ = JsonStringLexer();
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
      switch (string_.step(c)) {
        case JsonStringLexer::Step::kRefused: return false;
        case JsonStringLexer::Step::kMore: return true;
        case JsonStringLexer::Step::kClosed:
          if (key_) {
            key_ = false;
            whitespace_run_ = 0;
            mode_ = Mode::kColon;
          } else {
            end_value();
          }
          return true;
      }
      return false;
    case Mode::kNumber:
      switch (number_.step(c)) {
        case JsonNumberLexer::Step::kRefused: return false;
        case JsonNumberLexer::Step::kMore: return true;
        case JsonNumberLexer::Step::kEnded:  // the number ended before c
          end_value();
          return step(c);
      }
      return false;
    case Mode::kLiteral:
      if (static_cast<uint8_t>(literal_[literal_at_]) != c) return false;
      if (literal_[++literal_at_] == '\0') end_value();
      return true;
    case Mode::kDone: return is_whitespace(c) && whitespace();
  }
  return false;
}

}  // namespace kvs
