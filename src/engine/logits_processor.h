// The seam between the engine and what constrains a request's next token (JSON mode, structured outputs): before a
// token is drawn, the request's processor masks a copy of the model's logits row (logprobs stay the model's); the
// drawn token is then accepted; a processor that says the output is complete ends the request. The engine calls it
// without knowing what it masks. LogitsProcessors makes each request's (or none) from its parameters.
#pragma once

#include <memory>
#include <span>

#include "core/ids.h"
#include "core/status.h"
#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

class JsonTokenIndex;

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // Sets the logits of the tokens that may not come next to -inf; an error (nothing changed) when no token may.
  // `tokens_left`: how many more tokens may follow this one (max_tokens, the context).
  virtual Status mask(std::span<float> logits, size_t tokens_left) = 0;
  virtual void accept(TokenId token) = 0;
  // The output is whole: the request finishes (FinishReason::kDocumentComplete).
  virtual bool complete() const = 0;
  // Another sample of the same request, from this one's state.
  virtual std::unique_ptr<LogitsProcessor> fork() const = 0;
};

// Makes the processors of one engine's requests (what they share, such as the vocabulary's bytes, made once).
class LogitsProcessors {
 public:
  explicit LogitsProcessors(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  ~LogitsProcessors();
  // Whether `params` can be constrained within its max_tokens (an invalid_argument error naming the field if not).
  static Status validate(const RequestParams& params);
  // The processor of a request of `params` (validated), or null when nothing constrains it.
  std::unique_ptr<LogitsProcessor> make(const RequestParams& params);

 private:
  const Tokenizer& tokenizer_;
  std::shared_ptr<const JsonTokenIndex> json_index_;  // the vocabulary for JSON mode, made at its first request
};

}  // namespace kvs
