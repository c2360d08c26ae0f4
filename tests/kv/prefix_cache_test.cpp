// Prefix caching in the KV manager, with toy sizes and exact block ids: chained hashes, full hits that
// share blocks, partial matches that copy slots, a full-prompt hit that still computes its last token,
// salts, twins, LRU eviction of cached blocks, stale children of an evicted parent, forced collisions,
// and a randomized stress test of sequences sharing and evicting, invariants checked after every change.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv/kv_cache_manager.h"
#include "toy_kv.h"

namespace kvs::test {
namespace {

void expect_invariants(const KvCacheManager& kv) {
  const Status s = kv.check_invariants();
  ASSERT_TRUE(s.is_ok()) << s.message();
}

// Runs a whole sequence the way the scheduler does: look up, begin with room for the rest, commit it.
PrefixMatch run_sequence(KvCacheManager& kv, SeqId seq, std::span<const TokenId> tokens, uint32_t ns = 0) {
  const PrefixMatch m = kv.match_prefix(tokens, ns);
  const size_t cached = m.num_tokens(kv.block_size());
  EXPECT_TRUE(kv.begin(seq, tokens, ns, m, tokens.size() - cached));
  kv.copies_done();
  kv.commit(seq, tokens.subspan(cached));
  return m;
}

TEST(PrefixHash, ChainsParentAndTokensAndKeysTheRoot) {
  const BlockHash root = prefix_root_hash("model", "");
  const auto a = toy_tokens(4), b = toy_tokens(4, 1);
  EXPECT_EQ(chain_block_hash(root, a), chain_block_hash(root, a));
  EXPECT_NE(chain_block_hash(root, a), chain_block_hash(root, b));
  EXPECT_NE(chain_block_hash(root, a), chain_block_hash(chain_block_hash(root, a), a)) << "the parent is hashed";
  EXPECT_NE(root, prefix_root_hash("model", "tenant"));
  EXPECT_NE(root, prefix_root_hash("other model", ""));
  EXPECT_NE(prefix_root_hash("ab", "c"), prefix_root_hash("a", "bc"));
}

// A finished sequence's full blocks are shared by the next one; the matching part of its partial last
// block is copied into a block of the new sequence's own.
TEST(PrefixCache, FullBlocksAreSharedAndAPartialMatchIsCopied) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  const auto tokens = toy_tokens(12);
  run_sequence(kv, SeqId{1}, std::span(tokens).first(10));  // blocks 0 1 2; 0 and 1 full
  EXPECT_EQ(kv.prefix_index().num_entries(), 2u);
  kv.free(SeqId{1});  // block 2 (tokens 8, 9) stays findable; released tail first
  EXPECT_EQ(kv.prefix_index().num_entries(), 3u);
  EXPECT_EQ(ids(kv.pool().free_list()), (std::vector<uint32_t>{3, 4, 5, 6, 7, 2, 1, 0}));
  EXPECT_EQ(kv.usage().blocks_cached_idle, 3u);
  expect_invariants(kv);

  const PrefixMatch match = kv.match_prefix(tokens, 0);
  EXPECT_EQ(ids(match.blocks), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(match.partial_source, BlockId{2});
  EXPECT_EQ(match.partial_tokens, 2u);
  ASSERT_TRUE(kv.begin(SeqId{2}, tokens, 0, match, 2));
  EXPECT_EQ(ids(kv.block_table(SeqId{2})), (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(kv.num_tokens(SeqId{2}), 10u) << "the cached tokens count as computed";
  ASSERT_EQ(kv.pending_copies().size(), 1u);
  EXPECT_EQ(kv.pending_copies()[0].source, BlockId{2});
  EXPECT_EQ(kv.pending_copies()[0].destination, BlockId{3});
  EXPECT_EQ(kv.pending_copies()[0].num_slots, 2u);
  EXPECT_EQ(kv.pool().meta(BlockId{2}).ref_count, 1u) << "the copy's source is pinned";
  expect_invariants(kv);
  kv.copies_done();
  EXPECT_EQ(ids(kv.pool().free_list()), (std::vector<uint32_t>{4, 5, 6, 7, 2}));
  kv.commit(SeqId{2}, std::span(tokens).subspan(10));  // fills block 3: indexed
  EXPECT_TRUE(kv.prefix_index().contains(BlockId{3}));
  const PrefixCacheStats s = kv.prefix_stats();
  EXPECT_EQ(s.queried_tokens, 10u + 12u);
  EXPECT_EQ(s.hit_tokens, 10u);
  EXPECT_EQ(s.copied_tokens, 2u);
  expect_invariants(kv);
}

// The logits of the last prompt token must be computed, so a prompt that is wholly cached takes its
// full blocks but the last, and copies all of that one but its last slot.
TEST(PrefixCache, AWhollyCachedPromptStillComputesItsLastToken) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  const auto tokens = toy_tokens(8);
  run_sequence(kv, SeqId{1}, tokens);
  kv.free(SeqId{1});
  const PrefixMatch match = kv.match_prefix(tokens, 0);
  EXPECT_EQ(ids(match.blocks), (std::vector<uint32_t>{0}));
  EXPECT_EQ(match.partial_source, BlockId{1});
  EXPECT_EQ(match.partial_tokens, 3u);
  EXPECT_EQ(match.num_tokens(4), 7u);
  ASSERT_TRUE(kv.begin(SeqId{2}, tokens, 0, match, 1));
  EXPECT_EQ(kv.num_tokens(SeqId{2}), 7u);
  kv.copies_done();
  expect_invariants(kv);
}

TEST(PrefixCache, DifferentSaltsShareNothing) {
  const auto owned = toy_kv(4, 16);
  KvCacheManager& kv = *owned;
  const uint32_t alice = kv.name_space("alice"), bob = kv.name_space("bob");
  EXPECT_NE(alice, bob);
  EXPECT_EQ(kv.name_space("alice"), alice);
  const auto tokens = toy_tokens(9);
  run_sequence(kv, SeqId{1}, tokens, alice);
  EXPECT_EQ(kv.match_prefix(tokens, bob).num_tokens(4), 0u);
  EXPECT_EQ(kv.match_prefix(tokens, 0).num_tokens(4), 0u) << "no salt is a namespace of its own";
  EXPECT_EQ(kv.match_prefix(tokens, alice).num_tokens(4), 8u);
  // While the first sequence still runs, its full blocks are shared (read-only) with the second.
  const PrefixMatch match = kv.match_prefix(tokens, alice);
  ASSERT_TRUE(kv.begin(SeqId{2}, tokens, alice, match, 1));
  EXPECT_EQ(kv.pool().meta(BlockId{0}).ref_count, 2u);
  EXPECT_EQ(kv.pool().meta(BlockId{1}).ref_count, 2u);
  expect_invariants(kv);
}

// Two sequences that computed the same prefix at once: the second's blocks are twins, not indexed, and
// what it computes after them still chains from the indexed content.
TEST(PrefixCache, TwinsAreNotIndexedAndTheirChildrenChainFromTheIndexedContent) {
  const auto owned = toy_kv(4, 16);
  KvCacheManager& kv = *owned;
  const auto shared = toy_tokens(4);
  ASSERT_TRUE(kv.reserve(SeqId{1}, 4));
  ASSERT_TRUE(kv.reserve(SeqId{2}, 8));
  kv.commit(SeqId{1}, shared);  // block 0
  kv.commit(SeqId{2}, shared);  // block 1: a twin of block 0
  EXPECT_TRUE(kv.prefix_index().contains(BlockId{0}));
  EXPECT_FALSE(kv.prefix_index().contains(BlockId{1}));
  kv.commit(SeqId{2}, toy_tokens(4, 50));  // block 2, the child of block 0's content
  expect_invariants(kv);
  std::vector<TokenId> query = shared;
  for (TokenId t : toy_tokens(5, 50)) query.push_back(t);
  const PrefixMatch match = kv.match_prefix(query, 0);
  EXPECT_EQ(ids(match.blocks), (std::vector<uint32_t>{0, 2}));
  kv.free(SeqId{2});
  EXPECT_EQ(kv.pool().free_list().front(), BlockId{1}) << "a block without cached content is reused first";
  expect_invariants(kv);
}

// Cached blocks are evicted only when the pool needs them, least recently released first; blocks
// without content go before any cached one; a child whose parent was evicted is never matched.
TEST(PrefixCache, EvictsLeastRecentlyReleasedFirstAndForgetsOrphans) {
  const auto owned = toy_kv(2, 6);
  KvCacheManager& kv = *owned;
  run_sequence(kv, SeqId{1}, toy_tokens(4, 0));    // blocks 0 1
  run_sequence(kv, SeqId{2}, toy_tokens(4, 100));  // blocks 2 3
  kv.free(SeqId{1});                               // free: 4 5 1 0
  kv.free(SeqId{2});                               // free: 4 5 1 0 3 2
  EXPECT_EQ(ids(kv.pool().free_list()), (std::vector<uint32_t>{4, 5, 1, 0, 3, 2}));
  ASSERT_TRUE(kv.reserve(SeqId{3}, 6));  // takes 4 5 (empty) and 1 (the oldest cached: evicted)
  EXPECT_EQ(ids(kv.block_table(SeqId{3})), (std::vector<uint32_t>{4, 5, 1}));
  EXPECT_EQ(kv.prefix_stats().evictions, 1u);
  EXPECT_FALSE(kv.prefix_index().contains(BlockId{1}));
  expect_invariants(kv);
  EXPECT_EQ(kv.match_prefix(toy_tokens(5, 0), 0).num_tokens(2), 2u) << "block 0 is still cached";
  EXPECT_EQ(kv.match_prefix(toy_tokens(5, 100), 0).num_tokens(2), 4u);
  // Evict block 0 too, and give it new content: its old child (none left here) and its old tokens are gone.
  ASSERT_TRUE(kv.reserve(SeqId{4}, 1));
  EXPECT_EQ(ids(kv.block_table(SeqId{4})), (std::vector<uint32_t>{0}));
  EXPECT_EQ(kv.match_prefix(toy_tokens(5, 0), 0).num_tokens(2), 0u);
  expect_invariants(kv);
}

// After a lost device move nothing cached is trusted: forget_cached() drops every cached block's content (full and
// partial) without demoting it, the blocks stay free, and no lookup finds them.
TEST(PrefixCache, ForgetCachedLeavesNothingToMatch) {
  const auto owned = toy_kv(2, 6);
  KvCacheManager& kv = *owned;
  run_sequence(kv, SeqId{1}, toy_tokens(4, 0));    // blocks 0 1
  run_sequence(kv, SeqId{2}, toy_tokens(3, 100));  // blocks 2 3 (3 partial)
  kv.free(SeqId{1});
  kv.free(SeqId{2});
  ASSERT_EQ(kv.match_prefix(toy_tokens(5, 0), 0).num_tokens(2), 4u);
  ASSERT_GT(kv.pool().num_cached_free_blocks(), 0u);
  kv.forget_cached();
  EXPECT_EQ(kv.pool().num_cached_free_blocks(), 0u);
  EXPECT_EQ(kv.pool().num_free_blocks(), 6u);
  EXPECT_EQ(kv.prefix_index().num_entries(), 0u);
  EXPECT_EQ(kv.match_prefix(toy_tokens(5, 0), 0).num_tokens(2), 0u);
  EXPECT_EQ(kv.match_prefix(toy_tokens(4, 100), 0).num_tokens(2), 0u) << "nor the partial block";
  EXPECT_TRUE(kv.pending_transfers().empty()) << "nothing is demoted";
  expect_invariants(kv);
  run_sequence(kv, SeqId{3}, toy_tokens(4, 0));  // the pool works on
  EXPECT_EQ(kv.match_prefix(toy_tokens(5, 0), 0).num_tokens(2), 4u);
  expect_invariants(kv);
}

// A child's parent is a block and its generation: once the parent is evicted and refilled (a new
// generation), the child was computed after other K/V and is never matched. (The pool releases a
// sequence tail first, so children are evicted before parents and this is a guard, tested here on the
// index itself.)
TEST(PrefixIndex, ChildrenOfAnEvictedParentNeverMatch) {
  PrefixIndex index(8);
  const auto tokens = toy_tokens(4, 10);
  const BlockHash hash = chain_block_hash(prefix_root_hash("toy", ""), tokens);
  const ContentRef parent{.block = 3, .generation = 5};
  ASSERT_EQ(index.add_full(BlockId{1}, hash, parent, tokens), BlockId{1});
  EXPECT_EQ(index.find_full(hash, parent, tokens), BlockId{1});
  EXPECT_EQ(index.find_partial(parent, std::span(tokens).first(3)).num_tokens, 3u);
  const ContentRef refilled{.block = 3, .generation = 6};
  EXPECT_FALSE(index.find_full(hash, refilled, tokens));
  EXPECT_EQ(index.find_partial(refilled, tokens).num_tokens, 0u);
  EXPECT_TRUE(index.check_invariants().is_ok());
  EXPECT_TRUE(index.erase(BlockId{1}));
  EXPECT_FALSE(index.erase(BlockId{1}));
  EXPECT_FALSE(index.find_full(hash, parent, tokens));
  EXPECT_TRUE(index.check_invariants().is_ok());
}

// Every hash equal: block contents still decide, so different prompts never hit each other.
BlockHash colliding_hash(const BlockHash&, std::span<const TokenId>) { return {.low = 42, .high = 42}; }

TEST(PrefixCache, AForcedHashCollisionIsAMiss) {
  const auto owned = toy_kv(4, 16, colliding_hash);
  KvCacheManager& kv = *owned;
  run_sequence(kv, SeqId{1}, toy_tokens(9, 0));  // block 0 indexed; block 1 collides with it: not indexed
  EXPECT_EQ(kv.prefix_stats().collisions, 1u);
  EXPECT_TRUE(kv.prefix_index().contains(BlockId{0}));
  EXPECT_FALSE(kv.prefix_index().contains(BlockId{1}));
  const PrefixMatch other = kv.match_prefix(toy_tokens(9, 1000), 0);
  EXPECT_EQ(other.num_tokens(4), 0u) << "the hash matched, the tokens did not";
  EXPECT_EQ(kv.prefix_stats().collisions, 2u);
  EXPECT_EQ(kv.match_prefix(toy_tokens(9, 0), 0).blocks.size(), 1u);
  expect_invariants(kv);
}

// The match's own idle blocks are not free for the sequence's new ones.
TEST(PrefixCache, BeginCountsTheBlocksTheMatchTakes) {
  const auto owned = toy_kv(2, 4);
  KvCacheManager& kv = *owned;
  run_sequence(kv, SeqId{1}, toy_tokens(4));  // 0 1
  kv.free(SeqId{1});
  ASSERT_TRUE(kv.reserve(SeqId{2}, 2));  // block 2; free: 3 1 0
  const auto tokens = toy_tokens(9);
  const PrefixMatch match = kv.match_prefix(tokens, 0);
  ASSERT_EQ(match.blocks.size(), 2u);
  EXPECT_FALSE(kv.begin(SeqId{3}, tokens, 0, match, 5)) << "needs 3 new blocks; 1 is free besides the match";
  EXPECT_FALSE(kv.contains(SeqId{3}));
  expect_invariants(kv);
  EXPECT_TRUE(kv.begin(SeqId{3}, tokens, 0, match, 2));
  expect_invariants(kv);
}

TEST(PrefixCache, OffMeansNoLookupAndNoIndex) {
  KvCacheConfig config = toy_config(4, 8);
  config.prefix_caching = false;
  auto m = KvCacheManager::create(config);
  ASSERT_TRUE(m);
  KvCacheManager& kv = **m;
  run_sequence(kv, SeqId{1}, toy_tokens(9));
  EXPECT_EQ(kv.prefix_index().num_entries(), 0u);
  kv.free(SeqId{1});
  EXPECT_EQ(kv.match_prefix(toy_tokens(9), 0).num_tokens(4), 0u);
  EXPECT_EQ(kv.usage().blocks_cached_idle, 0u);
  expect_invariants(kv);
}

// Random prompts drawn from a few shared prefixes, run, grown, forked, freed and evicted under a small pool;
// every hit is checked against the tokens the sequence holds, and the invariants after every change.
TEST(PrefixCache, RandomizedStressOfSharingAndEviction) {
  for (size_t block_size : {1u, 4u, 16u}) {
    const auto owned = toy_kv(block_size, 48);
    KvCacheManager& kv = *owned;
    std::mt19937_64 rng(block_size + 7);
    std::vector<std::vector<TokenId>> prefixes;
    for (int p = 0; p < 4; ++p) prefixes.push_back(toy_tokens(5 + rng() % 40, static_cast<TokenId>(1000 * p)));
    std::map<uint64_t, std::vector<TokenId>> live;  // what each sequence should hold
    uint64_t next_id = 0;
    size_t hits = 0;
    for (int step = 0; step < 3000; ++step) {
      const int action = static_cast<int>(rng() % 10);
      if (action < 4 || live.empty()) {
        std::vector<TokenId> tokens = prefixes[rng() % prefixes.size()];
        tokens.resize(1 + rng() % tokens.size());
        for (size_t extra = rng() % 6; extra > 0; --extra) tokens.push_back(static_cast<TokenId>(rng() % 50));
        const SeqId id{next_id++};
        const PrefixMatch match = kv.match_prefix(tokens, 0);
        const size_t cached = match.num_tokens(block_size);
        ASSERT_LT(cached, tokens.size());
        if (kv.begin(id, tokens, 0, match, tokens.size() - cached)) {
          hits += cached;
          // What was taken is what the sequence asked for: the shared blocks' tokens and the copy's.
          for (size_t b = 0; b < match.blocks.size(); ++b) {
            const auto held = kv.prefix_index().tokens(match.blocks[b]);
            ASSERT_TRUE(std::equal(held.begin(), held.end(), tokens.begin() + static_cast<long>(b * block_size)));
          }
          if (match.partial_tokens > 0) {
            const auto held = kv.prefix_index().tokens(match.partial_source);
            ASSERT_TRUE(std::equal(held.begin(), held.begin() + static_cast<long>(match.partial_tokens),
                                   tokens.begin() + static_cast<long>(match.blocks.size() * block_size)));
          }
          ASSERT_TRUE(kv.check_invariants().is_ok()) << "step " << step << ": " << kv.check_invariants().message();
          kv.copies_done();
          kv.commit(id, std::span(tokens).subspan(cached));
          live[id.value] = tokens;
        } else {
          EXPECT_FALSE(kv.contains(id));
        }
      } else if (action < 7) {
        auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
        const auto more = toy_tokens(1 + rng() % 3, static_cast<TokenId>(rng() % 50));
        if (kv.reserve(SeqId{it->first}, more.size())) {
          ASSERT_TRUE(kv.check_invariants().is_ok()) << "step " << step << ": " << kv.check_invariants().message();
          kv.copies_done();
          kv.commit(SeqId{it->first}, more);
          it->second.insert(it->second.end(), more.begin(), more.end());
        }
      } else if (action == 7) {  // a parallel sample: shares every block, copies a partial one on write
        auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
        const SeqId id{next_id++};
        kv.fork(SeqId{it->first}, id);
        live[id.value] = it->second;
      } else {
        auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
        kv.free(SeqId{it->first});
        live.erase(it);
      }
      const Status s = kv.check_invariants();
      ASSERT_TRUE(s.is_ok()) << "step " << step << ": " << s.message();
      for (const auto& [id, tokens] : live) {
        const auto held = kv.tokens(SeqId{id});
        ASSERT_TRUE(std::equal(held.begin(), held.end(), tokens.begin(), tokens.end())) << "sequence " << id;
      }
    }
    EXPECT_GT(hits, 1000u) << "shared prefixes should hit";
    EXPECT_GT(kv.prefix_stats().evictions, 0u) << "a pool of 48 blocks should evict";
    if (block_size > 1) {
      EXPECT_GT(kv.num_copy_on_write(), 0u) << "forks that grow copy their partial block";
    }
    for (const auto& [id, tokens] : live) kv.free(SeqId{id});
    EXPECT_EQ(kv.usage().blocks_used, 0u);
    expect_invariants(kv);
  }
}

}  // namespace
}  // namespace kvs::test
