// A tokenizer's vocabulary for JSON mode (grammar/json_constraint.h): each token's bytes as output, and the tokens
// that end generation. Made once per engine (and by bench_json_mode).
#pragma once

#include <memory>

#include "grammar/json_constraint.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

std::shared_ptr<const JsonTokenIndex> json_token_index(const Tokenizer& tokenizer);

}  // namespace kvs
