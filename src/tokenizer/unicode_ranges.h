// Unicode character classes used by the regex-style pre-tokenizers: \p{L}, \p{N} and \s.
#pragma once

#include <cstdint>

namespace kvs::unicode {

enum class CharClass : uint8_t {
  kLetter,      // general category L* (Lu, Ll, Lt, Lm, Lo)
  kNumber,      // general category N* (Nd, Nl, No)
  kWhitespace,  // the White_Space property (what regex \s matches)
  kOther,       // everything else: marks, punctuation, symbols, controls, unassigned
};

bool is_letter(uint32_t code_point);
bool is_number(uint32_t code_point);
bool is_whitespace(uint32_t code_point);
CharClass char_class(uint32_t code_point);

}  // namespace kvs::unicode
