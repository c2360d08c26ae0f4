// The DeepSeek LLM pre-tokenizer (tokenizer.ggml.pre "deepseek-llm": DeepSeek LLM, V2, V2-Lite):
// a sequence of six splits, each applied to every piece the ones before it left, in which the
// matches and the gaps between them both become pieces (Hugging Face's Split with behavior
// "Isolated"):
//   1. [\r\n]
//   2. \s?[cased letters]+      (the tokenizer's own list of ranges, kCasedLetters below)
//   3. \s?[!-/:-~！-／：-～‘-‟　-。]+
//   4. \s+$                     ($ is the end of the piece being split)
//   5. [一-龥ࠀ-一가-퟿]+
//   6. \p{N}+
// Each split finds its leftmost match, greedy, then searches on from its end, as a regex engine
// does. \s is the White_Space property and a class holds the code points it lists, as in the
// model's own (Hugging Face) tokenizer.
#include <algorithm>
#include <optional>

#include "tokenizer/pretokenizer.h"

namespace kvs {
namespace {

using unicode::CharClass;

struct CodeRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// The class of split 2 as the tokenizer lists it (a subset of Lu/Ll/Lt), adjacent ranges joined.
// clang-format off
constexpr CodeRange kCasedLetters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// clang-format on

// Split 3: ASCII punctuation and symbols (not digits), their fullwidth forms, curly quotes, and
// the ideographic space, comma and full stop.
constexpr CodeRange kPunctuation[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

// Split 5: U+0800..U+9FA5 (the tokenizer's ࠀ-一 and 一-龥 overlap at U+4E00) and Hangul syllables.
constexpr CodeRange kCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

bool in_ranges(std::span<const CodeRange> ranges, uint32_t cp) {
  const auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                                   [](const CodeRange& r, uint32_t value) { return r.last < value; });
  return it != ranges.end() && it->first <= cp;
}

enum class Split { kNewline, kCasedLetters, kPunctuation, kTrailingSpace, kCjk, kNumbers };
constexpr Split kSplits[] = {Split::kNewline,       Split::kCasedLetters, Split::kPunctuation,
                             Split::kTrailingSpace, Split::kCjk,          Split::kNumbers};

struct Match {
  size_t begin;
  size_t end;
};

class DeepseekSplitter {
 public:
  explicit DeepseekSplitter(std::span<const ClassifiedChar> chars) : chars_(chars) {}

  // The leftmost match of `split` in chars [from, end), or none.
  std::optional<Match> find(Split split, size_t from, size_t end) const {
    if (split == Split::kTrailingSpace) {
      size_t begin = end;
      while (begin > from && is_space(begin - 1)) --begin;
      if (begin == end) return std::nullopt;
      return Match{begin, end};
    }
    const bool leading_space = split == Split::kCasedLetters || split == Split::kPunctuation;
    for (size_t pos = from; pos < end; ++pos) {
      size_t run_begin = pos;
      // \s? is greedy: it takes the space when the class follows it.
      if (leading_space && is_space(pos) && pos + 1 < end && in_class(split, pos + 1)) {
        run_begin = pos + 1;
      } else if (!in_class(split, pos)) {
        continue;
      }
      if (split == Split::kNewline) return Match{pos, pos + 1};
      size_t run_end = run_begin + 1;
      while (run_end < end && in_class(split, run_end)) ++run_end;
      return Match{pos, run_end};
    }
    return std::nullopt;
  }

 private:
  bool is_space(size_t i) const { return chars_[i].char_class == CharClass::kWhitespace; }
  bool in_class(Split split, size_t i) const {
    const uint32_t cp = chars_[i].code_point;
    switch (split) {
      case Split::kNewline: return cp == '\r' || cp == '\n';
      case Split::kCasedLetters: return in_ranges(kCasedLetters, cp);
      case Split::kPunctuation: return in_ranges(kPunctuation, cp);
      case Split::kCjk: return in_ranges(kCjk, cp);
      case Split::kNumbers: return chars_[i].char_class == CharClass::kNumber;
      case Split::kTrailingSpace: return is_space(i);
    }
    return false;
  }

  std::span<const ClassifiedChar> chars_;
};

}  // namespace

std::vector<std::string_view> split_deepseek_llm(std::string_view text) {
  const std::vector<ClassifiedChar> chars = classify_chars(text);
  const DeepseekSplitter splitter(chars);
  // Pieces as [begin, end) char indices; each split refines every piece.
  std::vector<Match> pieces;
  if (!chars.empty()) pieces.push_back({0, chars.size()});
  std::vector<Match> refined;
  for (const Split split : kSplits) {
    refined.clear();
    for (const Match& piece : pieces) {
      size_t pos = piece.begin;
      while (const std::optional<Match> match = splitter.find(split, pos, piece.end)) {
        if (match->begin > pos) refined.push_back({pos, match->begin});
        refined.push_back(*match);
        pos = match->end;
      }
      if (pos < piece.end) refined.push_back({pos, piece.end});
    }
    pieces.swap(refined);
  }
  std::vector<std::string_view> words;
  words.reserve(pieces.size());
  for (const Match& piece : pieces) {
    const size_t begin = chars[piece.begin].offset;
    const size_t end = piece.end < chars.size() ? chars[piece.end].offset : text.size();
    words.push_back(text.substr(begin, end - begin));
  }
  return words;
}

}  // namespace kvs
