#include "tokenizer/vocab.h"

#include <limits>

namespace kvs {

Expected<PreTokenizerKind> pre_tokenizer_from_name(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt-2" || name == "gpt2") return PreTokenizerKind::kGpt2;
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "smaug-bpe") {
    return PreTokenizerKind::kLlama3;
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizerKind::kQwen2;
  if (name == "deepseek-llm") return PreTokenizerKind::kDeepseekLlm;
  return Status::unimplemented(
      fmt::format("tokenizer.ggml.pre '{}' is not supported (supported: gpt-2, default, llama3, llama-v3, llama-bpe, "
                  "smaug-bpe, qwen2, deepseek-r1-qwen, deepseek-llm)",
                  name));
}

namespace {

Status check_id(std::string_view key, TokenId id, size_t vocab_size) {
  if (id >= -1 && (id < 0 || static_cast<size_t>(id) < vocab_size)) return Status::ok();
  return Status::out_of_range(fmt::format("{} = {} is outside the vocabulary of {} tokens", key, id, vocab_size));
}

}  // namespace

Status Vocab::validate() const {
  if (tokens.empty()) return Status::corrupt("tokenizer.ggml.tokens is empty");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    return Status::out_of_range(
        fmt::format("tokenizer.ggml.tokens has {} entries, more than token ids hold", tokens.size()));
  }
  if (!scores.empty() && scores.size() != tokens.size()) {
    return Status::corrupt(fmt::format("tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}",
                                       scores.size(), tokens.size()));
  }
  if (!types.empty() && types.size() != tokens.size()) {
    return Status::corrupt(fmt::format("tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}",
                                       types.size(), tokens.size()));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    if (static_cast<int>(types[i]) > kMaxTokenType) {
      return Status::corrupt(fmt::format("tokenizer.ggml.token_type[{}] = {} is not a token type (0..{})", i,
                                         static_cast<int>(types[i]), kMaxTokenType));
    }
  }
  if (kind == VocabKind::kBytePairs) {
    if (merges.empty()) return Status::corrupt("tokenizer.ggml.merges is empty for a gpt2 (byte-level BPE) vocabulary");
    for (size_t i = 0; i < merges.size(); ++i) {
      const size_t sep = merges[i].find(' ', 1);
      if (sep == std::string::npos || sep + 1 >= merges[i].size()) {
        return Status::corrupt(
            fmt::format("tokenizer.ggml.merges[{}] = '{}' is not two parts separated by a space", i, merges[i]));
      }
    }
  }
  KVS_RETURN_IF_ERROR(check_id("tokenizer.ggml.bos_token_id", bos, tokens.size()));
  KVS_RETURN_IF_ERROR(check_id("tokenizer.ggml.eos_token_id", eos, tokens.size()));
  KVS_RETURN_IF_ERROR(check_id("tokenizer.ggml.unknown_token_id", unknown, tokens.size()));
  KVS_RETURN_IF_ERROR(check_id("tokenizer.ggml.padding_token_id", padding, tokens.size()));
  KVS_RETURN_IF_ERROR(check_id("tokenizer.ggml.eot_token_id", eot, tokens.size()));
  return Status::ok();
}

}  // namespace kvs
