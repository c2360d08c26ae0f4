#include "tokenizer/pretokenizer.h"

#include "core/utf8.h"

namespace kvs {

std::vector<ClassifiedChar> classify_chars(std::string_view text) {
  std::vector<ClassifiedChar> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::DecodedChar c = utf8::decode(text, pos);
    const unicode::CharClass char_class = c.valid ? unicode::char_class(c.code_point) : unicode::CharClass::kOther;
    chars.push_back({c.code_point, static_cast<uint32_t>(pos), char_class});
    pos += c.length;
  }
  return chars;
}

std::vector<std::string_view> pre_tokenize(PreTokenizerKind kind, std::string_view text) {
  switch (kind) {
    case PreTokenizerKind::kGpt2: return split_gpt2(text);
    case PreTokenizerKind::kLlama3: return split_llama3(text, 3);
    case PreTokenizerKind::kQwen2: return split_llama3(text, 1);
    case PreTokenizerKind::kDeepseekLlm: return split_deepseek_llm(text);
  }
  return split_gpt2(text);
}

}  // namespace kvs
