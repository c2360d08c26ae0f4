// UTF-8 helpers shared by the tokenizers, the streaming decoder and the chat-template lexer. Decoding is strict
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF) but never fails: ill-formed bytes come
// back as an invalid unit, so callers can keep the raw bytes or replace them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvs::utf8 {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

struct DecodedChar {
  uint32_t code_point = 0;  // kReplacementChar when !valid
  size_t length = 1;        // bytes consumed, 1..4; for invalid input the maximal ill-formed
                            // subpart (a truncated sequence counts as one unit)
  bool valid = false;
};

// Decodes the character starting at text[pos] (pos < text.size()).
DecodedChar decode(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of a code point (asserts code_point <= U+10FFFF).
void append(std::string& out, uint32_t code_point);

// Length of the longest prefix of `text` that does not end inside a multi-byte character that
// could still be completed by more bytes. Invalid bytes count as complete (they never heal).
size_t complete_prefix_length(std::string_view text);

// Copy of `text` with each maximal ill-formed subpart replaced by one U+FFFD (as WHATWG does).
std::string sanitize(std::string_view text);

}  // namespace kvs::utf8
