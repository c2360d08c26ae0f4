// Byte-level BPE (GPT-2 family) as llama.cpp's llm_tokenizer_bpe runs it: the pre-tokenizer cuts
// the text into words; each word's bytes are mapped to printable characters (byte_unicode.h) and
// split into those characters; then the adjacent pair with the lowest merge rank merges first
// (ties: leftmost) until no pair is in tokenizer.ggml.merges.
#include <unordered_map>

#include "core/utf8.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvs {
namespace {

class ByteBpeTokenizer final : public TokenizerImpl {
 public:
  explicit ByteBpeTokenizer(Vocab vocab) : TokenizerImpl(std::move(vocab)) {
    merge_ranks_.reserve(this->vocab().merges.size());
    for (size_t i = 0; i < this->vocab().merges.size(); ++i) {
      merge_ranks_.emplace(this->vocab().merges[i], static_cast<int32_t>(i));  // first rank wins
    }
  }

  void encode_text(std::string_view text, bool /*starts_text*/, std::vector<TokenId>& out) const override {
    std::string key;  // reused "left right" lookup key
    for (std::string_view word : pre_tokenize(vocab().pre, text)) encode_word(byte_unicode::encode(word), key, out);
  }

  std::string piece(TokenId id) const override {
    const std::string& text = vocab().tokens[static_cast<size_t>(id)];
    switch (vocab().type_of(id)) {
      case TokenType::kUndefined:
      case TokenType::kNormal:
      case TokenType::kByte: return byte_unicode::decode(text);
      case TokenType::kUserDefined: return text;
      case TokenType::kUnknown:
      case TokenType::kControl:
      case TokenType::kUnused: return {};
    }
    return {};
  }

  bool strips_leading_space() const override { return false; }

 private:
  // `word` is already mapped to printable characters.
  void encode_word(std::string_view word, std::string& key, std::vector<TokenId>& out) const {
    // Llama 3 (tokenizer.json "ignore_merges"): a word that is a token is taken whole.
    if (vocab().pre == PreTokenizerKind::kLlama3) {
      if (const TokenId id = find(word); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    const auto cost = [&](std::string_view left, std::string_view right) -> std::optional<double> {
      key.assign(left);
      key += ' ';
      key.append(right);
      const auto it = merge_ranks_.find(key);
      if (it == merge_ranks_.end()) return std::nullopt;
      return it->second;
    };
    for (std::string_view piece : merge_pieces(word, cost)) {
      if (const TokenId id = find(piece); id >= 0) {
        out.push_back(id);
        continue;
      }
      // A merge result missing from the vocabulary: fall back to its characters (one per byte).
      for (size_t pos = 0; pos < piece.size();) {
        const size_t length = utf8::decode(piece, pos).length;
        const TokenId id = find(piece.substr(pos, length));
        if (id >= 0) {
          out.push_back(id);
        } else if (vocab().unknown >= 0) {
          out.push_back(vocab().unknown);
        }
        pos += length;
      }
    }
  }

  std::unordered_map<std::string, int32_t> merge_ranks_;  // "left right" -> rank
};

}  // namespace

std::unique_ptr<TokenizerImpl> make_byte_bpe_tokenizer(Vocab vocab) {
  return std::make_unique<ByteBpeTokenizer>(std::move(vocab));
}

}  // namespace kvs
