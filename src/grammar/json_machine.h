// A JSON recognizer that reads one byte at a time and refuses the first byte after which no valid JSON document
// could follow: the constraint of JSON mode (response_format json_object) checks a token by feeding it its bytes.
// RFC 8259 JSON with limits that keep generation finite and every number a finite double: nesting at most
// kMaxDepth, whitespace runs of at most kMaxWhitespaceRun bytes, numbers of at most kMaxNumberDigits digits with
// exponents of at most two (1e99; 1e400 would overflow parsers), and (json_object) a top-level object. Strings and
// numbers are read by json_lexers.h (strict UTF-8 and escapes). The state is a small value: copied to try a token.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/json_lexers.h"

namespace kvs {

class JsonMachine {
 public:
  static constexpr size_t kMaxDepth = 32;
  static constexpr size_t kMaxWhitespaceRun = 16;
  static constexpr size_t kMaxNumberDigits = 64;
  static constexpr size_t kMaxExponentDigits = 2;

  // top_level_object: the document must be an object (OpenAI's json_object), else any value.
  explicit JsonMachine(bool top_level_object = true) : object_only_(top_level_object) {}

  // Reads one byte; false (and the state unchanged) when no valid document continues with it.
  bool feed(uint8_t c);
  // Reads bytes until one is refused; false if any was (the state is then the one before that byte).
  bool feed(std::string_view bytes);
  // A whole document has been read (only whitespace may follow, and generation can stop).
  bool complete() const { return mode_ == Mode::kDone; }
  // Inside a string, between escapes and multi-byte characters, any byte of 0x20..0x7e but '"' and '\' continues it
  // and leaves the state as it was (the token masker's fast path): how many such bytes may follow (SIZE_MAX: any;
  // 0: not in a string, or no room).
  size_t plain_string_room() const { return mode_ == Mode::kString && string_.between_characters() ? SIZE_MAX : 0; }
  // A whole value has been read (complete(), or a number that the next byte may end): a holder that reads a value
  // of any kind with this machine (the schema machine's untyped values) may go on after it.
  bool value_can_end() const { return complete() || (mode_ == Mode::kNumber && depth_ == 0 && number_.can_end()); }
  // The fewest bytes that complete the document from here (closing the string, the value and every open container:
  // e.g. after {"a":[1,"x it is 3, "]}). Each of them can be written as a one-byte token that shortens the rest by one,
  // so a document whose completion fits the tokens left can always be finished in time.
  size_t completion_length() const;

 private:
  enum class Mode : uint8_t {
    kValue,          // a value is expected (after ':' or '[' or ',' in an array, or at the start)
    kFirstKeyOrEnd,  // after '{': a key or '}'
    kKey,            // after ',' in an object: a key
    kColon,          // after a key
    kAfterValue,     // in a container: ',' or its end
    kString,         // in a string (string_; key_ says whether it is a key)
    kNumber,         // in a number (number_)
    kLiteral,        // in true, false or null (literal_ and literal_at_)
    kDone,           // the document is complete
  };

  bool step(uint8_t c);
  bool start_value(uint8_t c);
  void end_value();   // a value ended: after it in its container, or the document is done
  bool whitespace();  // counts a whitespace byte; false past the run limit

  Mode mode_ = Mode::kValue;
  bool object_only_ = true;
  bool key_ = false;
  JsonStringLexer string_;
  JsonNumberLexer number_{false, kMaxNumberDigits};
  const char* literal_ = nullptr;
  uint8_t literal_at_ = 0;
  uint8_t whitespace_run_ = 0;
  bool empty_array_ = false;  // kValue right after a '[': ']' may close it
  uint8_t depth_ = 0;
  std::array<uint8_t, kMaxDepth> stack_{};  // '{' or '[' per open container
};

}  // namespace kvs
