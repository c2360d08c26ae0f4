#include "tokenizer/tokenizer_impl.h"

#include <algorithm>

namespace kvs {
namespace {

// Texts of control tokens that end a generation in common chat vocabularies (beside EOS/EOT).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
};

}  // namespace

TokenizerImpl::TokenizerImpl(Vocab vocab) : vocab_(std::move(vocab)) {
  index_.reserve(vocab_.size());
  for (size_t i = 0; i < vocab_.size(); ++i) {
    // Later duplicates win, as in llama.cpp's token_to_id.
    index_[vocab_.tokens[i]] = static_cast<TokenId>(i);
  }
  for (size_t i = 0; i < vocab_.size(); ++i) {
    const auto id = static_cast<TokenId>(i);
    const TokenType type = vocab_.type_of(id);
    const bool special = type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUserDefined;
    if (special && !vocab_.tokens[i].empty()) special_tokens_.push_back(id);
    const bool marks_end = std::find(std::begin(kEndOfGenerationTexts), std::end(kEndOfGenerationTexts),
                                     vocab_.tokens[i]) != std::end(kEndOfGenerationTexts);
    if (id == vocab_.eos || id == vocab_.eot || (marks_end && special)) end_of_generation_.push_back(id);
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [this](TokenId a, TokenId b) {
    return vocab_.tokens[static_cast<size_t>(a)].size() > vocab_.tokens[static_cast<size_t>(b)].size();
  });
}

TokenId TokenizerImpl::find(std::string_view text) const {
  const auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

bool TokenizerImpl::is_end_of_generation(TokenId id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

}  // namespace kvs
