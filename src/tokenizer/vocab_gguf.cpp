#include "tokenizer/vocab_gguf.h"

#include "tokenizer/tokenizer.h"

namespace kvs {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// The array under `key`, or an error when it is missing or holds other than `element_type`
// (any integer type passes for kInt32, any float for kFloat32).
Expected<const gguf::Array*> typed_array(const gguf::File& file, std::string_view key, gguf::ValueType element_type,
                                         bool required) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) {
    if (required) return Status::not_found(fmt::format("{} is missing from {}", key, file.path()));
    return static_cast<const gguf::Array*>(nullptr);
  }
  const gguf::Array* array = value->as_array();
  if (array == nullptr) {
    return Status::corrupt(fmt::format("{} must be an array of {}, got a {}", key, gguf::value_type_name(element_type),
                                       gguf::value_type_name(value->type)));
  }
  using gguf::ValueType;
  const ValueType t = array->element_type;
  const bool is_int = t == ValueType::kUint8 || t == ValueType::kInt8 || t == ValueType::kUint16 ||
                      t == ValueType::kInt16 || t == ValueType::kUint32 || t == ValueType::kInt32 ||
                      t == ValueType::kUint64 || t == ValueType::kInt64;
  const bool ok = t == element_type || (element_type == ValueType::kInt32 && is_int) ||
                  (element_type == ValueType::kFloat32 && t == ValueType::kFloat64);
  if (!ok) {
    return Status::corrupt(fmt::format("{} must be an array of {}, got an array of {}", key,
                                       gguf::value_type_name(element_type), gguf::value_type_name(t)));
  }
  return array;
}

Expected<std::vector<std::string>> read_strings(const gguf::File& file, std::string_view key, bool required) {
  auto array = typed_array(file, key, gguf::ValueType::kString, required);
  if (!array) return array.status();
  std::vector<std::string> out;
  if (*array == nullptr) return out;
  out.reserve((*array)->items.size());
  for (const gguf::Value& item : (*array)->items) out.push_back(*item.as_string());
  return out;
}

// A special token id; -1 (or its uint32 form 0xFFFFFFFF, as llama.cpp's converter writes) means none.
Expected<TokenId> read_id(const gguf::File& file, std::string_view key) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return TokenId{-1};
  const std::optional<int64_t> id = value->as_int();
  if (!id)
    return Status::corrupt(fmt::format("{} must be an integer, got a {}", key, gguf::value_type_name(value->type)));
  if (*id == -1 || *id == 0xFFFFFFFF) return TokenId{-1};
  if (*id < 0 || *id > std::numeric_limits<TokenId>::max()) {
    return Status::out_of_range(fmt::format("{} = {} is not a token id", key, *id));
  }
  return static_cast<TokenId>(*id);
}

Expected<bool> read_bool(const gguf::File& file, std::string_view key, bool fallback) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return fallback;
  const std::optional<bool> b = value->as_bool();
  if (!b) return Status::corrupt(fmt::format("{} must be a bool, got a {}", key, gguf::value_type_name(value->type)));
  return *b;
}

Status read_scores_and_types(const gguf::File& file, Vocab& vocab) {
  auto scores = typed_array(file, kScoresKey, gguf::ValueType::kFloat32, vocab.kind == VocabKind::kSentencePiece);
  if (!scores) return scores.status();
  if (*scores != nullptr) {
    vocab.scores.reserve((*scores)->items.size());
    for (const gguf::Value& item : (*scores)->items) vocab.scores.push_back(static_cast<float>(*item.as_float()));
  }
  auto types = typed_array(file, kTypesKey, gguf::ValueType::kInt32, false);
  if (!types) return types.status();
  if (*types != nullptr) {
    vocab.types.reserve((*types)->items.size());
    for (size_t i = 0; i < (*types)->items.size(); ++i) {
      const std::optional<int64_t> t = (*types)->items[i].as_int();
      if (!t || *t < 0 || *t > kMaxTokenType) {
        return Status::corrupt(fmt::format("{}[{}] = {} is not a token type (0..{})", kTypesKey, i,
                                           t ? fmt::to_string(*t) : std::string("?"), kMaxTokenType));
      }
      vocab.types.push_back(static_cast<TokenType>(*t));
    }
  }
  return Status::ok();
}

Status read_special_ids(const gguf::File& file, Vocab& vocab) {
  const std::pair<std::string_view, TokenId*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &vocab.bos},         {"tokenizer.ggml.eos_token_id", &vocab.eos},
      {"tokenizer.ggml.unknown_token_id", &vocab.unknown}, {"tokenizer.ggml.padding_token_id", &vocab.padding},
      {"tokenizer.ggml.eot_token_id", &vocab.eot},
  };
  for (const auto& [key, target] : keys) {
    auto id = read_id(file, key);
    if (!id) return id.status();
    *target = *id;
  }
  return Status::ok();
}

}  // namespace

Expected<Vocab> vocab_from_gguf(const gguf::File& file) {
  Vocab vocab;
  const gguf::Value* model_value = file.find(kModelKey);
  if (model_value == nullptr) return Status::not_found(fmt::format("{} is missing from {}", kModelKey, file.path()));
  if (model_value->as_string() == nullptr) {
    return Status::corrupt(
        fmt::format("{} must be a string, got a {}", kModelKey, gguf::value_type_name(model_value->type)));
  }
  const std::string& model = *model_value->as_string();
  if (model == "llama") {
    vocab.kind = VocabKind::kSentencePiece;
  } else if (model == "gpt2") {
    vocab.kind = VocabKind::kBytePairs;
  } else {
    return Status::unimplemented(fmt::format("{} '{}' is not supported (supported: llama, gpt2)", kModelKey, model));
  }
  if (vocab.kind == VocabKind::kBytePairs) {
    auto pre = pre_tokenizer_from_name(file.get_string("tokenizer.ggml.pre").value_or(""));
    if (!pre) return pre.status();
    vocab.pre = *pre;
  }

  auto tokens = read_strings(file, kTokensKey, true);
  if (!tokens) return tokens.status();
  vocab.tokens = std::move(*tokens);
  KVS_RETURN_IF_ERROR(read_scores_and_types(file, vocab));
  auto merges = read_strings(file, kMergesKey, vocab.kind == VocabKind::kBytePairs);
  if (!merges) return merges.status();
  vocab.merges = std::move(*merges);
  KVS_RETURN_IF_ERROR(read_special_ids(file, vocab));

  const bool spm = vocab.kind == VocabKind::kSentencePiece;
  auto add_bos = read_bool(file, "tokenizer.ggml.add_bos_token", spm);
  if (!add_bos) return add_bos.status();
  vocab.add_bos = *add_bos;
  auto add_space_prefix = read_bool(file, "tokenizer.ggml.add_space_prefix", spm);
  if (!add_space_prefix) return add_space_prefix.status();
  vocab.add_space_prefix = *add_space_prefix;

  KVS_RETURN_IF_ERROR(vocab.validate().with_context(file.path()));
  return vocab;
}

Expected<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  auto vocab = vocab_from_gguf(file);
  if (!vocab) return vocab.status();
  return from_vocab(std::move(*vocab));
}

}  // namespace kvs
