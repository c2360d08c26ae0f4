// JSON mode and structured outputs as a sampling constraint: before each token is drawn, every token of the
// vocabulary whose bytes cannot continue a valid JSON document (grammar/json_machine.h) or an instance of the
// request's JSON Schema (grammar/schema_machine.h) gets a logit of -inf; end-of-generation tokens only once the
// document is complete (and the engine stops there). JsonTokenIndex holds the vocabulary's bytes, built once and
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
#include <variant>
#include <vector>

#include "core/ids.h"
#include "grammar/json_machine.h"
#include "grammar/json_schema.h"
#include "grammar/schema_machine.h"

namespace kvs {

class JsonTokenIndex {
 public:
  // token_bytes[t]: token t's bytes as output ("" for control tokens, which are never allowed); end_tokens: the
  // tokens that end generation (EOS, EOT).
  JsonTokenIndex(std::vector<std::string> token_bytes, std::vector<TokenId> end_tokens);

  size_t vocab_size() const { return bytes_.size(); }
  // allowed[t] = whether token t may come next after `machine`'s document so far, leaving a document that
  // `tokens_left` more tokens can complete (the machine's completion_length bytes, one a token at worst).
  // `scratch`: the walk's states, one per trie depth (kept by the caller so that no walk allocates).
  template <class Machine>
  void allowed(const Machine& machine, size_t tokens_left, std::vector<uint8_t>& allowed,
               std::vector<Machine>& scratch) const;
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
  template <class Machine>
  void walk_trie(const Machine& machine, size_t tokens_left, std::vector<uint8_t>& allowed,
                 std::vector<Machine>& scratch) const;

  std::vector<std::string> bytes_;
  std::vector<uint8_t> plain_;  // [t]: non-empty, bytes 0x20..0x7e without '"' and '\': continues any plain string
  std::vector<uint8_t> end_;
  std::vector<TokenId> ends_;             // the end tokens
  std::vector<TokenId> not_plain_;        // the tokens with bytes that are not plain_ (fed inside strings)
  std::vector<TokenId> plain_by_length_;  // the plain_ tokens, longest first (refused past a string's maxLength)
  std::vector<TrieNode> trie_;            // [0]: the root (the empty prefix)
  size_t longest_ = 0;                    // the longest token's bytes
  // (token, earlier token): tokens whose bytes repeat an earlier token's, whose node holds that one; they follow it.
  std::vector<std::pair<TokenId, TokenId>> same_bytes_;
};

class JsonConstraint {
 public:
  // JSON mode: a JSON document (top_level_object: an object, as json_object demands).
  explicit JsonConstraint(std::shared_ptr<const JsonTokenIndex> index, bool top_level_object = true)
      : index_(std::move(index)), state_(JsonMode{JsonMachine(top_level_object), {}}) {}
  // Structured outputs: an instance of `schema`.
  JsonConstraint(std::shared_ptr<const JsonTokenIndex> index, std::shared_ptr<const JsonSchema> schema);
  JsonConstraint(const JsonConstraint&) = default;  // (a sample's fork: its own machine, the same schema)
  JsonConstraint& operator=(const JsonConstraint&) = delete;

  // Sets the logits of the tokens that may not come next to -inf; false when no token may (nothing was changed).
  // `tokens_left`: how many more may follow this one (max_tokens, the context): tokens that would leave a document
  // that cannot be completed in time are refused too, so the output is whole before the budget runs out.
  bool mask(std::span<float> logits, size_t tokens_left = SIZE_MAX);
  // Reads the token drawn (one mask allowed).
  void accept(TokenId token);
  // The document is complete: generation ends.
  bool complete() const;

 private:
  struct JsonMode {
    JsonMachine machine;
    std::vector<JsonMachine> scratch;
  };
  struct Schema {
    std::shared_ptr<const JsonSchema> schema;  // what the machine points into
    SchemaMachine machine;
    std::vector<SchemaMachine> scratch;
  };

  std::shared_ptr<const JsonTokenIndex> index_;
  std::variant<JsonMode, Schema> state_;
  std::vector<uint8_t> allowed_;
};

}  // namespace kvs
