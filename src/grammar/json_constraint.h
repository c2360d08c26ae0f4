// JSON mode as a sampling constraint: before each token is drawn, every token of the vocabulary whose bytes cannot
// continue a valid JSON document (grammar/json_machine.h) gets a logit of -inf; end-of-generation tokens only once
// the document is complete (and the engine stops there). JsonTokenIndex holds the vocabulary's bytes, built once and
// shared by every request; JsonConstraint is one request's state.
//
// Cost: outside strings the vocabulary is walked as a trie of its tokens' bytes, each byte fed once to a copy of the
// state and a refused byte skipping every token that starts with that prefix (after '{' all but a handful of the
// 32,000 tokens go at their first or second byte); inside a string (most of a JSON document) the tokens of plain
// printable ASCII without '"' or '\' are known to continue it and are not fed at all, the others are fed.
// Measured by bench/json_mode.sh.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "grammar/json_machine.h"

namespace kvs {

class JsonTokenIndex {
 public:
  // token_bytes[t]: token t's bytes as output ("" for control tokens, which are never allowed); end_tokens: the
  // tokens that end generation (EOS, EOT).
  JsonTokenIndex(std::vector<std::string> token_bytes, std::vector<TokenId> end_tokens);

  size_t vocab_size() const { return bytes_.size(); }
  // allowed[t] = whether token t may come next after `machine`'s document so far, leaving a document that
  // `tokens_left` more tokens can complete (JsonMachine::completion_length bytes, one a token at worst).
  void allowed(const JsonMachine& machine, size_t tokens_left, std::vector<uint8_t>& allowed) const;
  const std::string& bytes(TokenId t) const { return bytes_[static_cast<size_t>(t)]; }
  bool is_end(TokenId t) const { return end_[static_cast<size_t>(t)] != 0; }

 private:
  // The tokens' bytes as a trie: a node per distinct prefix, its children in a sibling list.
  struct TrieNode {
    uint8_t byte = 0;
    int32_t first_child = -1, next_sibling = -1;
    TokenId token = -1;  // the token whose bytes end here (-1: none)
  };
  void add_to_trie(TokenId token);
  void walk_trie(const JsonMachine& machine, size_t tokens_left, std::vector<uint8_t>& allowed) const;

  std::vector<std::string> bytes_;
  std::vector<uint8_t> plain_;  // [t]: non-empty, bytes 0x20..0x7e without '"' and '\': continues any plain string
  std::vector<uint8_t> end_;
  std::vector<TokenId> ends_;       // the end tokens
  std::vector<TokenId> not_plain_;  // the tokens with bytes that are not plain_ (fed inside strings)
  std::vector<TrieNode> trie_;      // [0]: the root (the empty prefix)
  // (token, earlier token): tokens whose bytes repeat an earlier token's, whose node holds that one; they follow it.
  std::vector<std::pair<TokenId, TokenId>> same_bytes_;
};

class JsonConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonTokenIndex> index, bool top_level_object = true)
      : index_(std::move(index)), machine_(top_level_object) {}

  // Sets the logits of the tokens that may not come next to -inf; false when no token may (nothing was changed).
  // `tokens_left`: how many more may follow this one (max_tokens, the context): tokens that would leave a document
  // that cannot be completed in time are refused too, so the output is whole before the budget runs out.
  bool mask(std::span<float> logits, size_t tokens_left = SIZE_MAX);
  // Reads the token drawn (one mask allowed).
  void accept(TokenId token);
  // The document is complete: generation ends.
  bool complete() const { return machine_.complete(); }

 private:
  std::shared_ptr<const JsonTokenIndex> index_;
  JsonMachine machine_;
  std::vector<uint8_t> allowed_;
};

}  // namespace kvs
