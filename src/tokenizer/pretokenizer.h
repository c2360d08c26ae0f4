// Pre-tokenizers of byte-level BPE vocabularies: the regex that cuts text into words, each of
// which is then BPE-merged on its own. The regexes are implemented by hand over the character
// classes of unicode_ranges.h (no regex library has \p{L} and lookahead at this speed).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/unicode_ranges.h"
#include "tokenizer/vocab.h"

namespace kvs {

struct ClassifiedChar {
  uint32_t code_point;  // U+FFFD for an ill-formed byte sequence (class kOther)
  uint32_t offset;      // byte offset in the text
  unicode::CharClass char_class;
};

// The characters of `text` in order; ill-formed bytes keep their place as kOther units.
std::vector<ClassifiedChar> classify_chars(std::string_view text);

// Words of `text`: non-empty views into it that cover it exactly, in order.
std::vector<std::string_view> pre_tokenize(PreTokenizerKind kind, std::string_view text);

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string_view> split_gpt2(std::string_view text);  // gpt2_pretokenizer.cpp

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// max_digits is 3 for Llama 3, 1 for Qwen2.
std::vector<std::string_view> split_llama3(std::string_view text,
                                           size_t max_digits);  // llama3_pretokenizer.cpp

// [\r\n], \s?[cased letters]+, \s?[ASCII/fullwidth punctuation]+, \s+$, CJK runs, \p{N}+:
// each applied in turn to the pieces the ones before it left, matches and gaps both kept.
std::vector<std::string_view> split_deepseek_llm(std::string_view text);  // deepseek_pretokenizer.cpp

}  // namespace kvs
