// The Llama 3 / Qwen2 pre-tokenizer regex, matched by hand:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Alternatives are tried in order at each position, as a backtracking regex engine does.
#include "tokenizer/pretokenizer.h"

namespace kvs {
namespace {

using unicode::CharClass;

uint32_t ascii_lower(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + ('a' - 'A') : cp; }
bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

class Llama3Matcher {
 public:
  Llama3Matcher(std::span<const ClassifiedChar> chars, size_t max_digits) : chars_(chars), max_digits_(max_digits) {}

  // End (char index) of the match starting at `pos` < size.
  size_t match(size_t pos) const {
    if (code_point(pos) == '\'') {
      const uint32_t c1 = ascii_lower(code_point(pos + 1));
      const uint32_t c2 = ascii_lower(code_point(pos + 2));
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return pos + 3;
    }
    const CharClass first = class_at(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (first == CharClass::kLetter) return run_end(pos, CharClass::kLetter);
    if (first != CharClass::kNumber && !is_newline(code_point(pos)) && class_at(pos + 1) == CharClass::kLetter) {
      return run_end(pos + 1, CharClass::kLetter);
    }
    // \p{N}{1,max_digits}
    if (first == CharClass::kNumber) {
      size_t end = pos;
      while (end < size() && end - pos < max_digits_ && class_at(end) == CharClass::kNumber) ++end;
      return end;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    const size_t start = (code_point(pos) == ' ' && class_at(pos + 1) == CharClass::kOther) ? pos + 1 : pos;
    if (class_at(start) == CharClass::kOther) {
      size_t end = run_end(start, CharClass::kOther);
      while (end < size() && is_newline(code_point(end))) ++end;
      return end;
    }
    // Here chars_[pos] is whitespace. \s*[\r\n]+: up to the last newline of the run.
    const size_t end = run_end(pos, CharClass::kWhitespace);
    for (size_t i = end; i > pos; --i) {
      if (is_newline(code_point(i - 1))) return i;
    }
    // \s+(?!\S), else \s+ for a single whitespace character before a non-space.
    if (end == size() || end - pos == 1) return end;
    return end - 1;
  }

 private:
  size_t size() const { return chars_.size(); }
  uint32_t code_point(size_t i) const { return i < size() ? chars_[i].code_point : 0xFFFFFFFFu; }
  // Past the end reads as whitespace, which no alternative needs to see there.
  CharClass class_at(size_t i) const { return i < size() ? chars_[i].char_class : CharClass::kWhitespace; }
  size_t run_end(size_t pos, CharClass char_class) const {
    while (pos < size() && chars_[pos].char_class == char_class) ++pos;
    return pos;
  }

  std::span<const ClassifiedChar> chars_;
  size_t max_digits_;
};

}  // namespace

std::vector<std::string_view> split_llama3(std::string_view text, size_t max_digits) {
  const std::vector<ClassifiedChar> chars = classify_chars(text);
  const Llama3Matcher matcher(chars, max_digits);
  std::vector<std::string_view> words;
  for (size_t pos = 0; pos < chars.size();) {
    const size_t end = matcher.match(pos);
    const size_t end_offset = end < chars.size() ? chars[end].offset : text.size();
    words.push_back(text.substr(chars[pos].offset, end_offset - chars[pos].offset));
    pos = end;
  }
  return words;
}

}  // namespace kvs
