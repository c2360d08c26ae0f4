// OpenAI's logprobs objects for one choice, built as its tokens come:
//   chat:         {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}],
//                  "refusal": null}
//   completions:  {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token: logprob}], "text_offset": [...]}
// A token's text is its bytes as output (tokenizer.h's token_bytes; invalid UTF-8 is replaced when the JSON is
// written, "bytes" keeps them exact). Completions with echo list the prompt's tokens first (the first with null
// logprob and alternatives, as OpenAI does); text_offset counts bytes from the start of the choice's text (the echoed
// prompt included; without echo, as OpenAI, from the prompt's start: the first generated token's offset is the
// prompt's length), and the first prompt piece drops its leading space as decoding does (a SentencePiece dummy
// prefix), so each token's text sits at its offset.
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "engine/sampler.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace kvs::server {

class ChoiceLogprobs {
 public:
  // `text_offset`: bytes of text before the first generated token (the prompt's).
  ChoiceLogprobs(const Tokenizer& tokenizer, Endpoint endpoint, size_t text_offset = 0);

  // Completions' echo: the prompt's tokens, `entries` for tokens 1.. (the engine's prompt logprobs).
  void add_prompt(std::span<const TokenId> prompt, std::span<const TokenLogprob> entries);
  // Generated tokens; returns the logprobs object of just these (a stream chunk's).
  nlohmann::json add(std::span<const TokenLogprob> entries);
  // Every token so far (the whole response's).
  const nlohmann::json& all() const { return all_; }

 private:
  // One token: its text and (null: a first prompt token, which has none) its entry.
  // leading: the token is the first piece of the prompt's text (its alternatives lose a dummy-prefix space too).
  void append(nlohmann::json& into, const std::string& text, const TokenLogprob* entry, bool leading);
  nlohmann::json empty() const;

  const Tokenizer& tokenizer_;
  bool chat_;
  size_t offset_;
  nlohmann::json all_;
};

}  // namespace kvs::server
