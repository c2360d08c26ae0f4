// SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it: spaces become "▁" (U+2581), a
// "▁" dummy prefix starts the text, the text splits into UTF-8 characters, then the adjacent pair
// whose concatenation is a token with the highest score merges first (ties: leftmost), until no
// pair is a token. A leftover character that is not a token is emitted as its <0xNN> byte tokens.
#include <algorithm>
#include <array>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvs {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";   // "▁"
constexpr std::string_view kUnknownGlyph = "\xE2\x96\x85";  // "▅", what llama.cpp prints for <unk>

// Parses "<0xNN>"; -1 when the text has another shape.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int digit = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                               : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

class SpmTokenizer final : public TokenizerImpl {
 public:
  explicit SpmTokenizer(Vocab vocab) : TokenizerImpl(std::move(vocab)) {
    for (int b = 0; b < 256; ++b) byte_tokens_[b] = find(fmt::format("<0x{:02X}>", b));
  }

  void encode_text(std::string_view text, bool starts_text, std::vector<TokenId>& out) const override {
    std::string escaped;
    escaped.reserve(text.size() + kSpaceMarker.size() * 4);
    if (starts_text && vocab().add_space_prefix) escaped += kSpaceMarker;
    for (char c : text) {
      if (c == ' ') {
        escaped += kSpaceMarker;
      } else {
        escaped += c;
      }
    }
    merge(escaped, out);
  }

  std::string piece(TokenId id) const override {
    const std::string& text = vocab().tokens[static_cast<size_t>(id)];
    switch (vocab().type_of(id)) {
      case TokenType::kUndefined:
      case TokenType::kNormal: return unescape(text);
      case TokenType::kUserDefined: return text;
      case TokenType::kByte: {
        const int byte = parse_byte_token(text);
        return byte < 0 ? text : std::string(1, static_cast<char>(byte));
      }
      case TokenType::kUnknown: return std::string(kUnknownGlyph);
      case TokenType::kControl:
      case TokenType::kUnused: return {};
    }
    return {};
  }

  bool strips_leading_space() const override { return vocab().add_space_prefix; }

 private:
  static std::string unescape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      if (text.substr(pos, kSpaceMarker.size()) == kSpaceMarker) {
        out += ' ';
        pos += kSpaceMarker.size();
      } else {
        out += text[pos++];
      }
    }
    return out;
  }

  void merge(std::string_view text, std::vector<TokenId>& out) const {
    // Merge when the concatenation is a token; the best score goes first.
    const auto cost = [this](std::string_view left, std::string_view right) -> std::optional<double> {
      const TokenId id = find(std::string_view(left.data(), left.size() + right.size()));
      if (id < 0) return std::nullopt;
      return -static_cast<double>(vocab().score_of(id));
    };
    for (std::string_view piece : merge_pieces(text, cost)) {
      const TokenId id = find(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      // Byte fallback; a vocabulary without byte tokens gets one <unk> for the character.
      const bool has_bytes =
          std::all_of(piece.begin(), piece.end(), [&](char c) { return byte_tokens_[static_cast<uint8_t>(c)] >= 0; });
      if (has_bytes) {
        for (char c : piece) out.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
      } else if (vocab().unknown >= 0) {
        out.push_back(vocab().unknown);
      }
    }
  }

  std::array<TokenId, 256> byte_tokens_{};  // <0xNN> token of each byte, -1 when missing
};

}  // namespace

std::unique_ptr<TokenizerImpl> make_spm_tokenizer(Vocab vocab) {
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace kvs
