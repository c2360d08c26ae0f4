// Splits input text around the special tokens it contains, before the BPE of each plain run.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "tokenizer/vocab.h"

namespace kvs {

struct TextFragment {
  std::string_view text;  // a run of plain text when token < 0
  TokenId token = -1;     // a special token found in the input
};

// `specials` in priority order (longest first): each one is cut out of the plain runs left by
// the ones before it. With parse_special false only user-defined tokens are matched; control
// and unknown token texts ("</s>") stay plain text. Fragments are never empty.
std::vector<TextFragment> split_special_tokens(std::string_view text, std::span<const TokenId> specials,
                                               const Vocab& vocab, bool parse_special);

}  // namespace kvs
