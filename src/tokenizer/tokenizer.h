// Tokenizers built from GGUF metadata (`tokenizer.ggml.*`) or a plain Vocab: Llama SentencePiece-BPE
// ("llama", with byte fallback) and byte-level BPE ("gpt2", with the GPT-2, Llama 3 or Qwen2
// pre-tokenizer named by tokenizer.ggml.pre). Encoding matches llama.cpp token for token.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace kvs {

class TokenizerImpl;  // one implementation per vocabulary family

class Tokenizer {
 public:
  static Expected<Tokenizer> from_gguf(const gguf::File& file);  // defined in vocab_gguf.cpp
  // From plain data (tests, other file formats): validates it first.
  static Expected<Tokenizer> from_vocab(Vocab vocab);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text -> ids. add_bos prepends BOS when the vocabulary has one. Special-token text such as
  // "</s>" in `text` is encoded as plain text unless parse_special is true.
  std::vector<TokenId> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // Ids -> text (BOS/EOS and other control tokens render as nothing). SentencePiece vocabularies
  // with a dummy prefix drop the one leading space of the first piece, so that
  // decode(encode(s)) == s. The bytes are raw: invalid UTF-8 in them is kept (see
  // StreamingDecoder for text that is always valid). Ids outside the vocabulary render as nothing.
  std::string decode(std::span<const TokenId> ids) const;
  // Raw bytes of one token as it appears in output (byte tokens give their byte, "▁" gives ' ').
  // Empty for control tokens and for ids outside the vocabulary.
  std::string token_bytes(TokenId id) const;
  std::string_view token_text(TokenId id) const;  // the vocabulary entry as stored ("" if out of range)
  // Whether decode drops the first piece's leading space (SentencePiece dummy prefix).
  bool strips_leading_space() const;
  // token_bytes as the first piece of a decoded text: without its one leading space when strips_leading_space().
  std::string leading_piece_bytes(TokenId id) const;
  const Vocab& vocab() const;

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
  // Decodes a whole sequence from its start: like decode(), drops the leading space of the
  // first piece when the tokenizer has a SentencePiece dummy prefix.
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // at_sequence_start false: the ids continue a sequence (generated tokens after a prompt), so
  // the first piece keeps its leading space.
  StreamingDecoder(const Tokenizer& tokenizer, bool at_sequence_start)
      : tokenizer_(tokenizer), first_(at_sequence_start) {}
  std::string push(TokenId id);  // text now complete (may be empty); invalid bytes become U+FFFD
  std::string finish();          // whatever is held back (an unfinished character becomes U+FFFD)

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
  bool first_ = true;  // SentencePiece drops the leading space of the first piece
};

}  // namespace kvs
