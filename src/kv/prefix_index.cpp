#include "kv/prefix_index.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvs {
namespace {

bool same_tokens(std::span<const TokenId> a, std::span<const TokenId> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

std::optional<BlockId> PrefixIndex::find_full(const BlockHash& hash, ContentRef parent,
                                              std::span<const TokenId> tokens) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Entry& e = entries_[it->second];
  if (e.parent != parent || !same_tokens(e.tokens, tokens)) {
    ++num_collisions_;
    return std::nullopt;
  }
  return BlockId{it->second};
}

std::optional<BlockId> PrefixIndex::find_full_by_hash(const BlockHash& hash, std::span<const TokenId> tokens) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || !same_tokens(entries_[it->second].tokens, tokens)) return std::nullopt;
  return BlockId{it->second};
}

PrefixIndex::PartialMatch PrefixIndex::find_partial(ContentRef parent, std::span<const TokenId> query) const {
  PartialMatch best;
  if (query.empty()) return best;
  const auto it = children_.find(ChildKey{parent, query[0]});
  if (it == children_.end()) return best;
  for (uint32_t block : it->second) {
    const std::vector<TokenId>& t = entries_[block].tokens;
    const size_t limit = std::min(t.size(), query.size());
    const size_t n = static_cast<size_t>(
        std::mismatch(t.begin(), t.begin() + static_cast<long>(limit), query.begin()).first - t.begin());
    if (n > best.num_tokens) best = {BlockId{block}, n};
  }
  return best;
}

void PrefixIndex::add(uint32_t block, Entry entry) {
  KVS_ASSERT(!entries_.at(block).indexed, "block {} is indexed twice", block);
  KVS_ASSERT(!entry.tokens.empty(), "block {} indexed with no tokens", block);
  entry.indexed = true;
  children_[ChildKey{entry.parent, entry.tokens[0]}].push_back(block);
  entries_[block] = std::move(entry);
  ++num_entries_;
}

std::optional<BlockId> PrefixIndex::add_full(BlockId block, const BlockHash& hash, ContentRef parent,
                                             std::span<const TokenId> tokens) {
  const auto it = by_hash_.find(hash);
  if (it != by_hash_.end()) {
    const Entry& e = entries_[it->second];
    if (e.parent == parent && same_tokens(e.tokens, tokens)) return BlockId{it->second};  // a twin
    ++num_collisions_;
    return std::nullopt;
  }
  by_hash_.emplace(hash, block.value);
  add(block.value, Entry{.full = true, .hash = hash, .parent = parent, .tokens = {tokens.begin(), tokens.end()}});
  return block;
}

void PrefixIndex::add_partial(BlockId block, ContentRef parent, std::span<const TokenId> tokens) {
  add(block.value, Entry{.full = false, .hash = {}, .parent = parent, .tokens = {tokens.begin(), tokens.end()}});
}

bool PrefixIndex::erase(BlockId block) {
  Entry& e = entries_.at(block.value);
  if (!e.indexed) return false;
  if (e.full) by_hash_.erase(e.hash);
  const auto it = children_.find(ChildKey{e.parent, e.tokens[0]});
  std::erase(it->second, block.value);
  if (it->second.empty()) children_.erase(it);
  e = Entry{};
  --num_entries_;
  return true;
}

Status PrefixIndex::check_invariants() const {
  size_t indexed = 0, listed = 0;
  for (uint32_t b = 0; b < entries_.size(); ++b) {
    const Entry& e = entries_[b];
    if (!e.indexed) continue;
    ++indexed;
    if (e.full) {
      const auto it = by_hash_.find(e.hash);
      if (it == by_hash_.end() || it->second != b)
        return Status::corrupt(fmt::format("full block {} is not the one its hash maps to", b));
    }
    const auto it = children_.find(ChildKey{e.parent, e.tokens[0]});
    if (it == children_.end() || std::count(it->second.begin(), it->second.end(), b) != 1)
      return Status::corrupt(fmt::format("block {} is not listed once under its parent", b));
  }
  for (const auto& [key, blocks] : children_) listed += blocks.size();
  if (indexed != num_entries_ || listed != num_entries_) {
    return Status::corrupt(
        fmt::format("{} entries counted, {} indexed, {} listed under parents", num_entries_, indexed, listed));
  }
  for (const auto& [hash, block] : by_hash_) {
    if (!entries_[block].indexed || !entries_[block].full)
      return Status::corrupt(fmt::format("a hash maps to block {}, which holds no full entry", block));
  }
  return Status::ok();
}

}  // namespace kvs
