#include "engine/json_vocabulary.h"

#include <string>
#include <vector>

namespace kvs {

std::shared_ptr<const JsonTokenIndex> json_token_index(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  std::vector<TokenId> ends;
  for (size_t t = 0; t < bytes.size(); ++t) {
    const auto id = static_cast<TokenId>(t);
    bytes[t] = tokenizer.token_bytes(id);
    if (tokenizer.is_end_of_generation(id)) ends.push_back(id);
  }
  return std::make_shared<const JsonTokenIndex>(std::move(bytes), std::move(ends));
}

}  // namespace kvs
