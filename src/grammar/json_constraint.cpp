#include "grammar/json_constraint.h"

#include <algorithm>
#include <limits>

#include "core/status.h"

namespace kvs {

JsonTokenIndex::JsonTokenIndex(std::vector<std::string> token_bytes, std::vector<TokenId> end_tokens)
    : bytes_(std::move(token_bytes)), plain_(bytes_.size(), 0), end_(bytes_.size(), 0) {
  for (size_t t = 0; t < bytes_.size(); ++t) {
    const std::string& b = bytes_[t];
    bool plain = !b.empty();
    for (char ch : b) {
      const auto c = static_cast<uint8_t>(ch);
      plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    }
    plain_[t] = plain;
  }
  for (TokenId t : end_tokens) {
    if (t < 0 || static_cast<size_t>(t) >= end_.size()) continue;
    end_[static_cast<size_t>(t)] = 1;
    plain_[static_cast<size_t>(t)] = 0;
    ends_.push_back(t);
  }
  for (size_t t = 0; t < bytes_.size(); ++t) {
    if (plain_[t]) plain_by_length_.push_back(static_cast<TokenId>(t));
    if (!plain_[t] && !end_[t] && !bytes_[t].empty()) not_plain_.push_back(static_cast<TokenId>(t));
  }
  std::stable_sort(plain_by_length_.begin(), plain_by_length_.end(),
                   [this](TokenId a, TokenId b) { return bytes(a).size() > bytes(b).size(); });
  trie_.emplace_back();
  for (size_t t = 0; t < bytes_.size(); ++t)
    if (!end_[t] && !bytes_[t].empty()) add_to_trie(static_cast<TokenId>(t));
}

void JsonTokenIndex::add_to_trie(TokenId token) {
  int32_t node = 0;
  for (char ch : bytes_[static_cast<size_t>(token)]) {
    const auto c = static_cast<uint8_t>(ch);
    int32_t child = trie_[static_cast<size_t>(node)].first_child;
    while (child >= 0 && trie_[static_cast<size_t>(child)].byte != c)
      child = trie_[static_cast<size_t>(child)].next_sibling;
    if (child < 0) {
      child = static_cast<int32_t>(trie_.size());
      trie_.push_back({.byte = c, .first_child = -1, .next_sibling = trie_[static_cast<size_t>(node)].first_child});
      trie_[static_cast<size_t>(node)].first_child = child;
    }
    node = child;
  }
  longest_ = std::max(longest_, bytes_[static_cast<size_t>(token)].size());
  if (trie_[static_cast<size_t>(node)].token < 0) {
    trie_[static_cast<size_t>(node)].token = token;
  } else {
    same_bytes_.emplace_back(token, trie_[static_cast<size_t>(node)].token);
  }
}

template <class Machine>
void JsonTokenIndex::walk_trie(const Machine& machine, size_t tokens_left, std::vector<uint8_t>& allowed,
                               std::vector<Machine>& scratch) const {
  // Depth first; scratch[d] is the state after the current node's prefix of d + 1 bytes, and scratch[d - 1] still
  // holds its parent's when a sibling is taken from the stack (only deeper states were written in between).
  if (scratch.size() < longest_) scratch.resize(longest_, machine);
  struct Pending {
    int32_t node;
    uint32_t depth;
  };
  std::vector<Pending> stack;
  for (int32_t c = trie_[0].first_child; c >= 0; c = trie_[static_cast<size_t>(c)].next_sibling)
    stack.push_back({c, 0});
  while (!stack.empty()) {
    const Pending p = stack.back();
    stack.pop_back();
    const TrieNode& node = trie_[static_cast<size_t>(p.node)];
    Machine& state = scratch[p.depth];
    state = p.depth == 0 ? machine : scratch[p.depth - 1];
    if (!state.feed(node.byte)) continue;  // no token with this prefix continues the document
    if (node.token >= 0) allowed[static_cast<size_t>(node.token)] = state.completion_length() <= tokens_left;
    for (int32_t c = node.first_child; c >= 0; c = trie_[static_cast<size_t>(c)].next_sibling)
      stack.push_back({c, p.depth + 1});
  }
}

template <class Machine>
void JsonTokenIndex::allowed(const Machine& machine, size_t tokens_left, std::vector<uint8_t>& allowed,
                             std::vector<Machine>& scratch) const {
  // A plain token leaves a plain string as it was (but for its length): it may come when the string's completion fits
  // what is left and the token fits the string's maximum length.
  const size_t room = machine.plain_string_room();
  if (room > 0 && machine.completion_length() <= tokens_left) {
    allowed = plain_;
    for (TokenId t : plain_by_length_) {  // longest first
      if (bytes(t).size() <= room) break;
      allowed[static_cast<size_t>(t)] = 0;
    }
    if (scratch.empty()) scratch.push_back(machine);
    for (TokenId t : not_plain_) {
      Machine& trial = scratch[0];
      trial = machine;
      allowed[static_cast<size_t>(t)] = trial.feed(bytes(t)) && trial.completion_length() <= tokens_left;
    }
  } else {
    allowed.assign(bytes_.size(), 0);
    walk_trie(machine, tokens_left, allowed, scratch);
  }
  for (const auto& [t, same] : same_bytes_) allowed[static_cast<size_t>(t)] = allowed[static_cast<size_t>(same)];
  for (TokenId t : ends_) allowed[static_cast<size_t>(t)] = machine.complete();  // control tokens stay refused
}

template void JsonTokenIndex::allowed(const JsonMachine&, size_t, std::vector<uint8_t>&,
                                      std::vector<JsonMachine>&) const;
template void JsonTokenIndex::allowed(const SchemaMachine&, size_t, std::vector<uint8_t>&,
                                      std::vector<SchemaMachine>&) const;

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonTokenIndex> index, std::shared_ptr<const JsonSchema> schema)
    : index_(std::move(index)), state_(Schema{schema, SchemaMachine(*schema), {}}) {}

bool JsonConstraint::mask(std::span<float> logits, size_t tokens_left) {
  KVS_ASSERT(logits.size() >= index_->vocab_size(), "{} logits for a vocabulary of {}", logits.size(),
             index_->vocab_size());
  std::visit([&](auto& s) { index_->allowed(s.machine, tokens_left, allowed_, s.scratch); }, state_);
  if (std::find(allowed_.begin(), allowed_.end(), uint8_t{1}) == allowed_.end()) return false;
  constexpr float kRefused = -std::numeric_limits<float>::infinity();
  const size_t n = allowed_.size();
  for (size_t t = 0; t < n; ++t) logits[t] = allowed_[t] ? logits[t] : kRefused;
  for (size_t t = n; t < logits.size(); ++t) logits[t] = kRefused;  // ids past the vocabulary (padded outputs)
  return true;
}

void JsonConstraint::accept(TokenId token) {
  if (index_->is_end(token)) return;
  const bool fed = std::visit([&](auto& s) { return s.machine.feed(index_->bytes(token)); }, state_);
  KVS_ASSERT(fed, "token {} was drawn outside the JSON constraint", token);
}

bool JsonConstraint::complete() const {
  return std::visit([](const auto& s) { return s.machine.complete(); }, state_);
}

}  // namespace kvs
