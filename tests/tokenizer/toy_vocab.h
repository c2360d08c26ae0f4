// Small hand-made vocabularies whose merges are easy to follow in tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/vocab.h"

namespace kvs::testing {

inline constexpr TokenId kToyUnk = 0;
inline constexpr TokenId kToyBos = 1;
inline constexpr TokenId kToyEos = 2;
inline constexpr TokenId toy_byte(int b) { return 3 + b; }  // "<0xNN>"
inline constexpr TokenId kToyFirstPiece = 259;              // toy_spm_pieces()[0]

// SentencePiece pieces after <unk>, <s>, </s> and the 256 byte tokens, with their scores.
inline std::vector<std::pair<std::string, float>> toy_spm_pieces() {
  return {
      {"\u2581", -3.0f},        // 259 "▁"
      {"a", -3.0f},             // 260
      {"b", -3.0f},             // 261
      {"c", -3.0f},             // 262
      {"\u2581a", -1.0f},       // 263 "▁a"
      {"ab", -0.5f},            // 264
      {"bc", -2.0f},            // 265
      {"abc", -0.1f},           // 266
      {"aa", -1.5f},            // 267
      {"<user>", 0.0f},         // 268, user-defined
      {"\u2581\u2581", -2.5f},  // 269 "▁▁"
  };
}

inline Vocab make_toy_spm_vocab() {
  Vocab vocab;
  vocab.kind = VocabKind::kSentencePiece;
  const auto add = [&](std::string text, float score, TokenType type) {
    vocab.tokens.push_back(std::move(text));
    vocab.scores.push_back(score);
    vocab.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::kByte);
  for (auto& [text, score] : toy_spm_pieces()) {
    add(text, score, text == "<user>" ? TokenType::kUserDefined : TokenType::kNormal);
  }
  vocab.unknown = kToyUnk;
  vocab.bos = kToyBos;
  vocab.eos = kToyEos;
  return vocab;
}

// Byte-level BPE: ids 0..255 are the bytes (as their GPT-2 characters), then merge results.
inline Vocab make_toy_bpe_vocab(std::vector<std::string> merges) {
  Vocab vocab;
  vocab.kind = VocabKind::kBytePairs;
  vocab.add_bos = false;
  vocab.add_space_prefix = false;
  for (int b = 0; b < 256; ++b) vocab.tokens.push_back(byte_unicode::encode(std::string(1, static_cast<char>(b))));
  for (const std::string& merge : merges) {
    const size_t space = merge.find(' ');
    vocab.tokens.push_back(merge.substr(0, space) + merge.substr(space + 1));
  }
  vocab.merges = std::move(merges);
  vocab.tokens.push_back("<|endoftext|>");
  vocab.types.assign(vocab.tokens.size(), TokenType::kNormal);
  vocab.types.back() = TokenType::kControl;
  vocab.eos = static_cast<TokenId>(vocab.tokens.size() - 1);
  return vocab;
}

}  // namespace kvs::testing
