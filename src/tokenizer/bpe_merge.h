// The merge loop both BPE flavours share (llama.cpp's llm_tokenizer_spm / _bpe sessions): start
// from the UTF-8 characters of a text, repeatedly merge the adjacent pair of pieces with the
// lowest cost (ties: leftmost pair) until no pair has a cost. A priority queue with lazy deletion
// of stale pairs keeps this O(n log n).
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace kvs {

namespace bpe_detail {

// A piece of the text; pieces form a linked list in text order. A piece merged into its left
// neighbour keeps length 0.
struct Symbol {
  uint32_t offset;
  uint32_t length;
  int32_t prev;
  int32_t next;  // -1 at the ends
};

struct Candidate {
  double cost;
  int32_t left;
  int32_t right;
  uint32_t length;  // of both pieces when pushed: a stale candidate no longer matches
};

struct HigherCost {  // std::priority_queue puts the "largest" on top: make that the cheapest
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.cost > b.cost || (a.cost == b.cost && a.left > b.left);
  }
};

}  // namespace bpe_detail

// `cost(left, right)` -> std::optional<double>: nullopt when the pair cannot merge. `left` and
// `right` are adjacent views into `text`. Returns the final pieces in text order.
template <class CostFn>
std::vector<std::string_view> merge_pieces(std::string_view text, CostFn&& cost) {
  using bpe_detail::Candidate;
  using bpe_detail::Symbol;
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = utf8::decode(text, pos).length;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(length), index - 1, index + 1});
    pos += length;
  }
  std::vector<std::string_view> pieces;
  if (symbols.empty()) return pieces;
  symbols.back().next = -1;

  const auto view = [&](const Symbol& s) { return text.substr(s.offset, s.length); };
  std::priority_queue<Candidate, std::vector<Candidate>, bpe_detail::HigherCost> queue;
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::optional<double> c = cost(view(symbols[left]), view(symbols[right]));
    if (c) queue.push({*c, left, right, symbols[left].length + symbols[right].length});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Candidate best = queue.top();
    queue.pop();
    Symbol& left = symbols[best.left];
    Symbol& right = symbols[best.right];
    // Stale: a side was merged elsewhere since the pair was pushed (pieces only grow, so equal
    // lengths mean the same two pieces).
    if (left.length == 0 || right.length == 0 || left.length + right.length != best.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = best.left;
    try_add(left.prev, best.left);
    try_add(best.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) pieces.push_back(view(symbols[i]));
  return pieces;
}

}  // namespace kvs
