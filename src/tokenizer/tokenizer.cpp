#include "tokenizer/tokenizer.h"

#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvs {

Expected<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  KVS_RETURN_IF_ERROR(vocab.validate());
  switch (vocab.kind) {
    case VocabKind::kSentencePiece: return Tokenizer(make_spm_tokenizer(std::move(vocab)));
    case VocabKind::kBytePairs: return Tokenizer(make_byte_bpe_tokenizer(std::move(vocab)));
  }
  return Status::invalid_argument(fmt::format("unknown vocabulary kind {}", static_cast<int>(vocab.kind)));
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && impl_->vocab().bos >= 0) ids.push_back(impl_->vocab().bos);
  // As llama.cpp: the text start and every special token begin a new run (dummy prefix there).
  bool starts_text = true;
  for (const TextFragment& fragment :
       split_special_tokens(text, impl_->special_tokens(), impl_->vocab(), parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      starts_text = true;
    } else {
      impl_->encode_text(fragment.text, starts_text, ids);
      starts_text = false;
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string text;
  bool first = true;  // until the first piece that is not empty
  for (const TokenId id : ids) {
    std::string piece = token_bytes(id);
    if (first && !piece.empty()) {
      piece = leading_piece_bytes(id);
      first = false;
    }
    text += piece;
  }
  return text;
}

std::string Tokenizer::leading_piece_bytes(TokenId id) const {
  std::string piece = token_bytes(id);
  if (impl_->strips_leading_space() && !piece.empty() && piece.front() == ' ') piece.erase(0, 1);
  return piece;
}

std::string Tokenizer::token_bytes(TokenId id) const { return impl_->contains(id) ? impl_->piece(id) : std::string(); }

std::string_view Tokenizer::token_text(TokenId id) const {
  return impl_->contains(id) ? std::string_view(impl_->vocab().tokens[static_cast<size_t>(id)]) : std::string_view();
}

bool Tokenizer::strips_leading_space() const { return impl_->strips_leading_space(); }
const Vocab& Tokenizer::vocab() const { return impl_->vocab(); }
size_t Tokenizer::vocab_size() const { return impl_->vocab().size(); }
TokenId Tokenizer::bos() const { return impl_->vocab().bos; }
TokenId Tokenizer::eos() const { return impl_->vocab().eos; }
bool Tokenizer::is_end_of_generation(TokenId id) const { return impl_->is_end_of_generation(id); }
bool Tokenizer::add_bos_by_default() const { return impl_->vocab().add_bos && impl_->vocab().bos >= 0; }

}  // namespace kvs
