#include "engine/logits_processor.h"

#include <fmt/format.h>

#include "engine/json_vocabulary.h"
#include "grammar/json_constraint.h"

namespace kvs {
namespace {

// JSON mode and structured outputs (grammar/json_constraint.h).
class JsonLogitsProcessor final : public LogitsProcessor {
 public:
  explicit JsonLogitsProcessor(JsonConstraint constraint) : constraint_(std::move(constraint)) {}
  Status mask(std::span<float> logits, size_t tokens_left) override {
    if (constraint_.mask(logits, tokens_left)) return Status::ok();
    return Status::unavailable(
        "structured output: no token of the model's vocabulary continues the output within the tokens left");
  }
  void accept(TokenId token) override { constraint_.accept(token); }
  bool complete() const override { return constraint_.complete(); }
  std::unique_ptr<LogitsProcessor> fork() const override {
    return std::make_unique<JsonLogitsProcessor>(JsonConstraint(constraint_));
  }

 private:
  JsonConstraint constraint_;
};

}  // namespace

LogitsProcessors::~LogitsProcessors() = default;

Status LogitsProcessors::validate(const RequestParams& params) {
  if (params.json_object && params.max_new_tokens < 2) {
    return Status::invalid_argument(
               fmt::format("JSON mode needs at least 2 tokens to write an object ('{{}}'), but max_tokens is {}",
                           params.max_new_tokens))
        .with_field("max_tokens");
  }
  if (params.json_schema) {  // each byte of the shortest instance may take a token of its own
    const size_t shortest = params.json_schema->node(params.json_schema->root()).shortest;
    if (params.max_new_tokens < shortest) {
      return Status::invalid_argument(fmt::format("the schema's shortest instance takes {} bytes, which may need as "
                                                  "many tokens, but max_tokens is {}",
                                                  shortest, params.max_new_tokens))
          .with_field("max_tokens");
    }
  }
  return Status::ok();
}

std::unique_ptr<LogitsProcessor> LogitsProcessors::make(const RequestParams& params) {
  if (!params.json_schema && !params.json_object) return nullptr;
  if (!json_index_) json_index_ = json_token_index(tokenizer_);
  if (params.json_schema) return std::make_unique<JsonLogitsProcessor>(JsonConstraint(json_index_, params.json_schema));
  return std::make_unique<JsonLogitsProcessor>(JsonConstraint(json_index_));
}

}  // namespace kvs
