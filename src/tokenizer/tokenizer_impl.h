// The part of a tokenizer that differs per vocabulary family (one implementation per file:
// spm_bpe.cpp, byte_bpe.cpp) and the lookups they share. Internal to src/tokenizer.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "tokenizer/vocab.h"

namespace kvs {

class TokenizerImpl {
 public:
  explicit TokenizerImpl(Vocab vocab);  // vocab must have passed validate()
  virtual ~TokenizerImpl() = default;
  TokenizerImpl(const TokenizerImpl&) = delete;  // index_ points into vocab_.tokens
  TokenizerImpl& operator=(const TokenizerImpl&) = delete;

  const Vocab& vocab() const { return vocab_; }
  bool contains(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < vocab_.size(); }
  TokenId find(std::string_view text) const;  // -1 when `text` is not a token
  // Tokens matched as a whole in input text: control and unknown (with parse_special) and
  // user-defined (always), longest text first, as llama.cpp does.
  std::span<const TokenId> special_tokens() const { return special_tokens_; }
  bool is_end_of_generation(TokenId id) const;

  // Encodes a run of text that holds no special token, appending to `out`. `starts_text`: the
  // run begins the input or follows a special token (where SentencePiece puts its dummy prefix).
  virtual void encode_text(std::string_view text, bool starts_text, std::vector<TokenId>& out) const = 0;
  // The bytes one valid token contributes to decoded text.
  virtual std::string piece(TokenId id) const = 0;
  // Whether decoding drops the one leading space of the first piece (the dummy prefix).
  virtual bool strips_leading_space() const = 0;

 private:
  Vocab vocab_;
  std::unordered_map<std::string_view, TokenId> index_;  // views into vocab_.tokens
  std::vector<TokenId> special_tokens_;
  std::vector<TokenId> end_of_generation_;  // sorted
};

std::unique_ptr<TokenizerImpl> make_spm_tokenizer(Vocab vocab);       // spm_bpe.cpp
std::unique_ptr<TokenizerImpl> make_byte_bpe_tokenizer(Vocab vocab);  // byte_bpe.cpp

}  // namespace kvs
