// The GPT-2 pre-tokenizer regex, matched by hand:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Alternatives are tried in order at each position, as a backtracking regex engine does.
#include "tokenizer/pretokenizer.h"

namespace kvs {
namespace {

using unicode::CharClass;

class Gpt2Matcher {
 public:
  explicit Gpt2Matcher(std::span<const ClassifiedChar> chars) : chars_(chars) {}

  // End (char index) of the match starting at `pos` < size.
  size_t match(size_t pos) const {
    if (code_point(pos) == '\'') {
      const uint32_t c1 = code_point(pos + 1);
      const uint32_t c2 = code_point(pos + 2);
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return pos + 3;
    }
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": the classes are disjoint, so the first
    // character after the optional space picks the alternative.
    const size_t start = (code_point(pos) == ' ' && pos + 1 < size() && !is_space(pos + 1)) ? pos + 1 : pos;
    const CharClass run_class = chars_[start].char_class;
    if (run_class != CharClass::kWhitespace) return run_end(start, run_class);
    // \s+(?!\S): the whitespace run, less its last character when a non-space follows;
    // \s+: a single whitespace character before a non-space.
    const size_t end = run_end(pos, CharClass::kWhitespace);
    if (end == size() || end - pos == 1) return end;
    return end - 1;
  }

 private:
  size_t size() const { return chars_.size(); }
  uint32_t code_point(size_t i) const { return i < size() ? chars_[i].code_point : 0xFFFFFFFFu; }
  bool is_space(size_t i) const { return chars_[i].char_class == CharClass::kWhitespace; }
  size_t run_end(size_t pos, CharClass char_class) const {
    while (pos < size() && chars_[pos].char_class == char_class) ++pos;
    return pos;
  }

  std::span<const ClassifiedChar> chars_;
};

}  // namespace

std::vector<std::string_view> split_gpt2(std::string_view text) {
  const std::vector<ClassifiedChar> chars = classify_chars(text);
  const Gpt2Matcher matcher(chars);
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
