// Forked sequences (parallel sampling) in the KV manager, with toy sizes and exact block ids: a fork
// shares every block; the first holder to write into a shared partial block gets a private copy and
// the last writes in place (n forks cost n - 1 copies); the copy's block counts when reserving; a
// freed sequence drops its pending copies; full blocks a fork fills are indexed from the shared
// hashes; invariants hold after every change.
#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"
#include "toy_kv.h"

namespace kvs::test {
namespace {

void expect_invariants(const KvCacheManager& kv) {
  const Status s = kv.check_invariants();
  ASSERT_TRUE(s.is_ok()) << s.message();
}

// Begins `seq` without a lookup and commits `tokens`.
void run_prompt(KvCacheManager& kv, SeqId seq, std::span<const TokenId> tokens) {
  ASSERT_TRUE(kv.begin(seq, tokens, 0, PrefixMatch{}, tokens.size()));
  kv.commit(seq, tokens);
}

TEST(KvFork, SharesEveryBlockAndTheFirstWritersCopyThePartialOne) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  const auto prompt = toy_tokens(10);
  run_prompt(kv, SeqId{1}, prompt);  // blocks 0 1 2; 2 holds two slots
  kv.fork(SeqId{1}, SeqId{2});
  kv.fork(SeqId{1}, SeqId{3});
  for (uint64_t s : {1u, 2u, 3u}) {
    EXPECT_EQ(ids(kv.block_table(SeqId{s})), (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(kv.num_tokens(SeqId{s}), 10u);
  }
  for (uint32_t b : {0u, 1u, 2u}) EXPECT_EQ(kv.pool().meta(BlockId{b}).ref_count, 3u);
  EXPECT_EQ(kv.usage().blocks_used, 3u);
  expect_invariants(kv);

  ASSERT_TRUE(kv.reserve(SeqId{2}, 1));  // shares block 2 with 1 and 3: copies it
  EXPECT_EQ(ids(kv.block_table(SeqId{2})), (std::vector<uint32_t>{0, 1, 3}));
  ASSERT_EQ(kv.pending_copies().size(), 1u);
  EXPECT_EQ(kv.pending_copies()[0].source, BlockId{2});
  EXPECT_EQ(kv.pending_copies()[0].destination, BlockId{3});
  EXPECT_EQ(kv.pending_copies()[0].num_slots, 2u);
  expect_invariants(kv);
  ASSERT_TRUE(kv.reserve(SeqId{3}, 1));  // still shared with 1
  EXPECT_EQ(ids(kv.block_table(SeqId{3})), (std::vector<uint32_t>{0, 1, 4}));
  ASSERT_TRUE(kv.reserve(SeqId{1}, 1));  // the last holder (the copies' pins aside) writes in place
  EXPECT_EQ(ids(kv.block_table(SeqId{1})), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(kv.pending_copies().size(), 2u);
  EXPECT_EQ(kv.num_copy_on_write(), 2u);
  expect_invariants(kv);
  kv.copies_done();
  EXPECT_EQ(kv.pool().meta(BlockId{2}).ref_count, 1u);
  EXPECT_EQ(kv.usage().blocks_used, 5u) << "the prompt's two full blocks once, and three tails";

  for (uint64_t s : {1u, 2u, 3u}) kv.commit(SeqId{s}, toy_tokens(1, static_cast<TokenId>(100 * s)));
  expect_invariants(kv);
  ASSERT_TRUE(kv.reserve(SeqId{2}, 1)) << "its block is its own now: no copy";
  EXPECT_TRUE(kv.pending_copies().empty());
  kv.commit(SeqId{2}, toy_tokens(1, 7));
  for (uint64_t s : {1u, 2u, 3u}) kv.free(SeqId{s});
  EXPECT_EQ(kv.usage().blocks_used, 0u);
  expect_invariants(kv);
}

TEST(KvFork, AForkAtABlockBoundaryCopiesNothing) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  run_prompt(kv, SeqId{1}, toy_tokens(8));
  kv.fork(SeqId{1}, SeqId{2});
  ASSERT_TRUE(kv.reserve(SeqId{1}, 1));
  ASSERT_TRUE(kv.reserve(SeqId{2}, 1));
  EXPECT_TRUE(kv.pending_copies().empty());
  EXPECT_EQ(ids(kv.block_table(SeqId{1})), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(ids(kv.block_table(SeqId{2})), (std::vector<uint32_t>{0, 1, 3}));
  expect_invariants(kv);
}

TEST(KvFork, ReservingCountsTheCopysBlock) {
  const auto owned = toy_kv(4, 3);
  KvCacheManager& kv = *owned;
  run_prompt(kv, SeqId{1}, toy_tokens(10));  // the whole pool
  kv.fork(SeqId{1}, SeqId{2});
  EXPECT_FALSE(kv.can_reserve(SeqId{2}, 1)) << "one slot is left in block 2, but it is shared";
  EXPECT_FALSE(kv.reserve(SeqId{2}, 1));
  EXPECT_EQ(ids(kv.block_table(SeqId{2})), (std::vector<uint32_t>{0, 1, 2})) << "a failed reserve changes nothing";
  EXPECT_TRUE(kv.pending_copies().empty());
  expect_invariants(kv);
  kv.free(SeqId{1});
  EXPECT_TRUE(kv.can_reserve(SeqId{2}, 2)) << "the sole holder writes in place";
  ASSERT_TRUE(kv.reserve(SeqId{2}, 2));
  EXPECT_TRUE(kv.pending_copies().empty());
  expect_invariants(kv);
}

TEST(KvFork, AFreedSequenceDropsItsPendingCopies) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  run_prompt(kv, SeqId{1}, toy_tokens(6));
  kv.fork(SeqId{1}, SeqId{2});
  ASSERT_TRUE(kv.reserve(SeqId{2}, 1));
  ASSERT_EQ(kv.pending_copies().size(), 1u);
  kv.free(SeqId{2});  // preempted before the pass that would copy
  EXPECT_TRUE(kv.pending_copies().empty());
  expect_invariants(kv);
  kv.copies_done();
  EXPECT_EQ(kv.usage().blocks_used, 2u);
  expect_invariants(kv);
}

// A fork inherits the prompt's hashes: the blocks it fills chain from them, so a later prompt that
// continues the prompt with the fork's tokens finds all of them.
TEST(KvFork, BlocksAForkFillsAreIndexedAfterThePrompt) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  const auto prompt = toy_tokens(6);
  run_prompt(kv, SeqId{1}, prompt);
  kv.fork(SeqId{1}, SeqId{2});
  const auto continuation = toy_tokens(6, 50);
  ASSERT_TRUE(kv.reserve(SeqId{2}, continuation.size()));
  kv.copies_done();
  kv.commit(SeqId{2}, continuation);
  expect_invariants(kv);
  std::vector<TokenId> longer = prompt;
  longer.insert(longer.end(), continuation.begin(), continuation.end());
  longer.push_back(99);
  const PrefixMatch m = kv.match_prefix(longer, 0);
  EXPECT_EQ(m.blocks.size(), 3u);
  EXPECT_EQ(ids(m.blocks), ids(kv.block_table(SeqId{2})));
}

}  // namespace
}  // namespace kvs::test
