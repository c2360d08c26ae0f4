#include "server/logprobs_json.h"

namespace kvs::server {

using nlohmann::json;

namespace {

json byte_values(const std::string& text) {
  json bytes = json::array();
  for (char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

}  // namespace

ChoiceLogprobs::ChoiceLogprobs(const Tokenizer& tokenizer, Endpoint endpoint, size_t text_offset)
    : tokenizer_(tokenizer), chat_(endpoint == Endpoint::kChatCompletions), offset_(text_offset), all_(empty()) {}

json ChoiceLogprobs::empty() const {
  if (chat_) return {{"content", json::array()}, {"refusal", nullptr}};
  return {{"tokens", json::array()},
          {"token_logprobs", json::array()},
          {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
}

void ChoiceLogprobs::append(json& into, const std::string& text, const TokenLogprob* entry, bool leading) {
  // The alternatives of a text's first piece are written as that piece is (without a dummy-prefix space).
  const auto bytes_of = [&](TokenId id) {
    return leading ? tokenizer_.leading_piece_bytes(id) : tokenizer_.token_bytes(id);
  };
  if (chat_) {
    json top = json::array();
    for (const auto& [id, logprob] : entry->top) {
      const std::string t = bytes_of(id);
      top.push_back({{"token", t}, {"logprob", logprob}, {"bytes", byte_values(t)}});
    }
    into["content"].push_back(
        {{"token", text}, {"logprob", entry->logprob}, {"bytes", byte_values(text)}, {"top_logprobs", std::move(top)}});
    return;
  }
  into["tokens"].push_back(text);
  into["text_offset"].push_back(offset_);
  offset_ += text.size();
  if (!entry) {
    into["token_logprobs"].push_back(nullptr);
    into["top_logprobs"].push_back(nullptr);
    return;
  }
  into["token_logprobs"].push_back(entry->logprob);
  json top = json::object();
  for (const auto& [id, logprob] : entry->top) top[bytes_of(id)] = logprob;
  into["top_logprobs"].push_back(std::move(top));
}

void ChoiceLogprobs::add_prompt(std::span<const TokenId> prompt, std::span<const TokenLogprob> entries) {
  offset_ = 0;
  bool first_piece = true;  // the prompt's text starts with it: as decode writes it
  for (size_t i = 0; i < prompt.size(); ++i) {
    std::string text = tokenizer_.token_bytes(prompt[i]);
    const bool leading = first_piece && !text.empty();
    if (leading) {
      text = tokenizer_.leading_piece_bytes(prompt[i]);
      first_piece = false;
    }
    append(all_, text, i == 0 || i - 1 >= entries.size() ? nullptr : &entries[i - 1], leading);
  }
}

json ChoiceLogprobs::add(std::span<const TokenLogprob> entries) {
  json chunk = empty();
  for (const TokenLogprob& e : entries) append(chunk, tokenizer_.token_bytes(e.token), &e, false);
  for (auto& [key, values] : chunk.items()) {  // the chunk's entries join the whole response's
    if (!values.is_array()) continue;
    json& into = all_[key];
    into.insert(into.end(), values.begin(), values.end());
  }
  return chunk;
}

}  // namespace kvs::server
