// Tokenizers built from GGUF metadata (`tokenizer.ggml.*`): Llama SentencePiece-BPE ("llama")
// and GPT-2 style byte-level BPE ("gpt2").
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "model/gguf.h"

namespace kvs {

class TokenizerImpl;  // one implementation per vocabulary family

class Tokenizer {
 public:
  static Expected<Tokenizer> from_gguf(const gguf::File& file);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text -> ids. add_bos prepends BOS when the vocabulary has one. Special-token text such as
  // "</s>" in `text` is encoded as plain text unless parse_special is true.
  std::vector<TokenId> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // Ids -> text (BOS/EOS and other control tokens render as nothing).
  std::string decode(std::span<const TokenId> ids) const;
  // Raw bytes of one token as it appears in output (byte tokens give their byte, "▁" gives ' ').
  std::string token_bytes(TokenId id) const;
  std::string_view token_text(TokenId id) const;  // the vocabulary entry as stored

  size_t vocab_size() const;
  TokenId bos() const;  // -1 when the vocabulary has none
  TokenId eos() const;
  bool is_end_of_generation(TokenId id) const;  // EOS, EOT and similar
  bool add_bos_by_default() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Turns a stream of ids into UTF-8 text pieces without ever splitting a multi-byte character:
// bytes of an incomplete character are held back until the character completes.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(TokenId id);  // text now complete (may be empty)
  std::string finish();          // whatever is held back (invalid bytes become U+FFFD)

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
  bool first_ = true;  // SentencePiece drops the leading space of the first piece
};

}  // namespace kvs
