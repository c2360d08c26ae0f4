#include "tokenizer/special_tokens.h"

namespace kvs {

std::vector<TextFragment> split_special_tokens(std::string_view text, std::span<const TokenId> specials,
                                               const Vocab& vocab, bool parse_special) {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text, -1});
  std::vector<TextFragment> next;
  for (const TokenId special : specials) {
    if (!parse_special && vocab.type_of(special) != TokenType::kUserDefined) continue;
    const std::string_view needle = vocab.tokens[static_cast<size_t>(special)];
    next.clear();
    for (const TextFragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (size_t hit = rest.find(needle); hit != std::string_view::npos; hit = rest.find(needle)) {
        if (hit > 0) next.push_back({rest.substr(0, hit), -1});
        next.push_back({needle, special});
        rest.remove_prefix(hit + needle.size());
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace kvs
