// The prefix index: which blocks hold which content, so a new request can take cached K/V instead of
// computing it again. Full blocks are found by their chained hash (prefix_hash.h); every block with
// content (full, or the partial last block of a finished sequence) is also listed under its parent,
// by its first token, for the longest partial match (a prompt that shares less than a block).
//
// A hit is confirmed by content, never by the hash alone: the entry's parent must be the block the
// walk matched one step before (same block, same generation: a parent that was evicted and reused has
// a new generation) and its tokens must equal the query's. Metadata only: no K/V bytes here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/prefix_hash.h"

namespace kvs {

// Whose child a block's content is: the block holding the content before it (with that block's
// generation when the child was indexed), or for a first block the root of a namespace (a cache salt).
struct ContentRef {
  static constexpr uint32_t kRoot = UINT32_MAX;
  uint32_t block = kRoot;   // kRoot: a first block, under namespace `generation`
  uint32_t generation = 0;  // the parent block's generation, or the namespace of a root
  static constexpr uint32_t kUnknown = UINT32_MAX - 1;
  static ContentRef root(uint32_t name_space) { return {kRoot, name_space}; }
  // A parent that was not looked up (a sliding window's block before the window): no entry's parent is this,
  // so a child indexed under it is found by hash only (find_full_by_hash).
  static ContentRef unknown() { return {kUnknown, 0}; }
  bool operator==(const ContentRef&) const = default;
};

class PrefixIndex {
 public:
  explicit PrefixIndex(size_t num_blocks) : entries_(num_blocks) {}

  // The indexed full block under `hash`, if its content is confirmed (same parent, same tokens). An
  // indexed block whose content differs is a collision: counted, and a miss.
  std::optional<BlockId> find_full(const BlockHash& hash, ContentRef parent, std::span<const TokenId> tokens);
  // The indexed full block under `hash` whose tokens equal `tokens`, whatever its parent: for a sliding window,
  // whose blocks before the window may be gone. The chained 128-bit hash stands for the prefix.
  std::optional<BlockId> find_full_by_hash(const BlockHash& hash, std::span<const TokenId> tokens) const;

  struct PartialMatch {
    BlockId block = kNullBlock;
    size_t num_tokens = 0;  // leading tokens of the query the block holds; 0: no match
  };
  // Among the blocks under `parent` that start with query[0], the one sharing the longest prefix with
  // `query` (at most query.size() tokens).
  PartialMatch find_partial(ContentRef parent, std::span<const TokenId> query) const;

  // Indexes a full block. Returns the block that now stands for this content: `block`, or an indexed
  // twin with the same parent and tokens (then `block` is not indexed: its twin serves the hits);
  // nullopt when another content holds the hash (a collision: `block` is not indexed).
  std::optional<BlockId> add_full(BlockId block, const BlockHash& hash, ContentRef parent,
                                  std::span<const TokenId> tokens);
  // Indexes a partial block (fewer tokens than a block) for partial matches only.
  void add_partial(BlockId block, ContentRef parent, std::span<const TokenId> tokens);
  // Forgets a block's content (it is taken for new content). Returns whether there was any.
  bool erase(BlockId block);

  bool contains(BlockId block) const { return entries_.at(block.value).indexed; }
  // The hash of an indexed full block; nullopt for a partial or no entry.
  std::optional<BlockHash> full_hash(BlockId block) const {
    const Entry& e = entries_.at(block.value);
    return e.indexed && e.full ? std::optional<BlockHash>(e.hash) : std::nullopt;
  }
  std::span<const TokenId> tokens(BlockId block) const { return entries_.at(block.value).tokens; }
  size_t num_entries() const { return num_entries_; }
  uint64_t num_collisions() const { return num_collisions_; }
  // Every full entry is the one its hash maps to, every entry is listed under its parent once.
  Status check_invariants() const;

 private:
  struct Entry {
    bool indexed = false;
    bool full = false;
    BlockHash hash;  // full entries only
    ContentRef parent;
    std::vector<TokenId> tokens;
  };
  struct ChildKey {
    ContentRef parent;
    TokenId first = 0;
    bool operator==(const ChildKey&) const = default;
  };
  struct ChildKeyHash {
    size_t operator()(const ChildKey& k) const {
      return (uint64_t{k.parent.block} * 0x9E3779B97F4A7C15ull) ^ (uint64_t{k.parent.generation} << 32) ^
             static_cast<uint32_t>(k.first);
    }
  };
  void add(uint32_t block, Entry entry);

  std::vector<Entry> entries_;                                                  // [block]
  std::unordered_map<BlockHash, uint32_t, BlockHashKey> by_hash_;               // full entries
  std::unordered_map<ChildKey, std::vector<uint32_t>, ChildKeyHash> children_;  // every entry
  size_t num_entries_ = 0;
  uint64_t num_collisions_ = 0;
};

}  // namespace kvs
