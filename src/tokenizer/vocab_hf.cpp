#include "tokenizer/vocab_hf.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvs {
namespace {

using nlohmann::json;

Expected<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("cannot open {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::io_error(fmt::format("reading {} failed", path));
  return buffer.str();
}

Expected<json> read_json(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.status();
  json parsed = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::corrupt(fmt::format("{} is not valid JSON", path));
  return parsed;
}

// Places `text` at `id`, growing the table; ids beyond int32 are corrupt.
Status place(Vocab& vocab, const std::string& source, const std::string& text, int64_t id, TokenType type) {
  if (id < 0 || id >= std::numeric_limits<TokenId>::max()) {
    return Status::corrupt(fmt::format("{}: token '{}' has id {}, outside 0..{}", source, text, id,
                                       std::numeric_limits<TokenId>::max() - 1));
  }
  const auto index = static_cast<size_t>(id);
  if (index >= vocab.tokens.size()) {
    vocab.tokens.resize(index + 1);
    vocab.types.resize(index + 1, TokenType::kUndefined);  // kUndefined marks a gap until filled
  }
  vocab.tokens[index] = text;
  vocab.types[index] = type;
  return Status::ok();
}

// "eos_token": "<|im_end|>" or {"content": "<|im_end|>", ...} or null.
TokenId special_id(const json& config, const char* key, const Vocab& vocab) {
  const auto it = config.find(key);
  if (it == config.end()) return -1;
  const json* content = &*it;
  if (it->is_object() && it->contains("content")) content = &(*it)["content"];
  if (!content->is_string()) return -1;
  const auto name = content->get<std::string>();
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    if (vocab.tokens[i] == name) return static_cast<TokenId>(i);
  }
  return -1;
}

Status read_config(const std::string& path, Vocab& vocab) {
  auto config = read_json(path);
  if (!config) return config.status();
  if (const auto added = config->find("added_tokens_decoder"); added != config->end() && added->is_object()) {
    for (const auto& [id_text, token] : added->items()) {
      const auto content = token.find("content");
      if (content == token.end() || !content->is_string()) {
        return Status::corrupt(fmt::format("{}: added token {} has no string \"content\"", path, id_text));
      }
      int64_t id = -1;
      try {
        id = std::stoll(id_text);
      } catch (const std::exception&) {
        return Status::corrupt(fmt::format("{}: added token id '{}' is not a number", path, id_text));
      }
      const bool special = token.value("special", false);
      KVS_RETURN_IF_ERROR(
          place(vocab, path, content->get<std::string>(), id, special ? TokenType::kControl : TokenType::kUserDefined));
    }
  }
  vocab.bos = special_id(*config, "bos_token", vocab);
  vocab.eos = special_id(*config, "eos_token", vocab);
  vocab.padding = special_id(*config, "pad_token", vocab);
  vocab.unknown = special_id(*config, "unk_token", vocab);
  if (const auto add_bos = config->find("add_bos_token"); add_bos != config->end() && add_bos->is_boolean()) {
    vocab.add_bos = add_bos->get<bool>();
  }
  return Status::ok();
}

Status read_merges(const std::string& path, Vocab& vocab) {
  auto text = read_text(path);
  if (!text) return text.status();
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (vocab.merges.empty() && line.rfind("#version", 0) == 0)) continue;
    vocab.merges.push_back(std::move(line));
  }
  return Status::ok();
}

}  // namespace

Expected<Vocab> vocab_from_hf_files(const HfTokenizerFiles& files, PreTokenizerKind pre) {
  Vocab vocab;
  vocab.kind = VocabKind::kBytePairs;
  vocab.pre = pre;
  vocab.add_bos = false;
  vocab.add_space_prefix = false;

  auto tokens = read_json(files.vocab_json);
  if (!tokens) return tokens.status();
  if (!tokens->is_object()) return Status::corrupt(fmt::format("{} is not a JSON object", files.vocab_json));
  for (const auto& [text, id] : tokens->items()) {
    if (!id.is_number_integer()) {
      return Status::corrupt(fmt::format("{}: token '{}' has a non-integer id {}", files.vocab_json, text, id.dump()));
    }
    KVS_RETURN_IF_ERROR(place(vocab, files.vocab_json, text, id.get<int64_t>(), TokenType::kNormal));
  }
  if (!files.tokenizer_config_json.empty()) KVS_RETURN_IF_ERROR(read_config(files.tokenizer_config_json, vocab));
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    if (vocab.types[i] == TokenType::kUndefined) {
      vocab.tokens[i] = fmt::format("[PAD{}]", i);
      vocab.types[i] = TokenType::kUnused;
    }
  }
  KVS_RETURN_IF_ERROR(read_merges(files.merges_txt, vocab));
  KVS_RETURN_IF_ERROR(vocab.validate().with_context(files.vocab_json));
  return vocab;
}

}  // namespace kvs
