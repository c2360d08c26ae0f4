// A tokenizer vocabulary as plain data: what GGUF's `tokenizer.ggml.*` metadata holds, after
// parsing, and what a Tokenizer is built from. Loading lives in vocab_gguf.cpp / vocab_hf.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace kvs {

// Values of `tokenizer.ggml.token_type` (llama.cpp's llama_token_type).
enum class TokenType : uint8_t {
  kUndefined = 0,  // treated as normal
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, </s>, <|endoftext|>: rendered as nothing
  kUserDefined = 4,  // always matched as a whole in input text, rendered verbatim
  kUnused = 5,
  kByte = 6,  // SentencePiece byte fallback "<0xNN>"
};
inline constexpr int kMaxTokenType = 6;

enum class VocabKind : uint8_t {
  kSentencePiece,  // tokenizer.ggml.model "llama": score-driven BPE over "▁"-escaped text
  kBytePairs,      // tokenizer.ggml.model "gpt2": byte-level BPE with ranked merges
};

// The regex that splits text into words before byte-level BPE (tokenizer.ggml.pre).
enum class PreTokenizerKind : uint8_t {
  kGpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,       // case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ...
  kQwen2,        // as kLlama3 but one digit per word
  kDeepseekLlm,  // six splits in sequence: newlines, cased-letter words, punctuation, trailing
                 // space, CJK runs, number runs (DeepSeek LLM / V2)
};

// Maps a tokenizer.ggml.pre value to a pre-tokenizer; unknown names are kUnimplemented.
// A missing key or "default" means the GPT-2 regex (llama.cpp's fallback for unnamed ones).
Expected<PreTokenizerKind> pre_tokenizer_from_name(std::string_view name);

struct Vocab {
  VocabKind kind = VocabKind::kSentencePiece;
  PreTokenizerKind pre = PreTokenizerKind::kGpt2;  // byte-level BPE only
  std::vector<std::string> tokens;                 // id -> text as stored
  std::vector<float> scores;                       // SentencePiece merge priority; empty: all 0
  std::vector<TokenType> types;                    // empty: all normal
  std::vector<std::string> merges;                 // byte-level BPE "left right", rank = index
  TokenId bos = -1;                                // -1: none
  TokenId eos = -1;
  TokenId unknown = -1;
  TokenId padding = -1;
  TokenId eot = -1;  // end of turn (chat models)
  bool add_bos = true;
  bool add_space_prefix = true;  // SentencePiece dummy prefix "▁" before the text

  // Sizes agree, ids are in range, merges have their separator. Messages name the GGUF key.
  Status validate() const;
  size_t size() const { return tokens.size(); }
  TokenType type_of(TokenId id) const { return types.empty() ? TokenType::kNormal : types[static_cast<size_t>(id)]; }
  float score_of(TokenId id) const { return scores.empty() ? 0.0f : scores[static_cast<size_t>(id)]; }
};

}  // namespace kvs
