// Key tails in the KV manager (kv/key_tail_table.h): with keys quantized per channel, the block where
// a sequence's row group fills holds a tail from the reserve that starts the group to the commit that
// completes it; a step that crosses into the next block holds two; a copy on write copies the tail;
// freed blocks give theirs back; running out of tails refuses a reserve with nothing changed. Exact
// tail counts, invariants after every change.
#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"
#include "toy_kv.h"

namespace kvs::test {
namespace {

void expect_invariants(const KvCacheManager& kv) {
  const Status s = kv.check_invariants();
  ASSERT_TRUE(s.is_ok()) << s.message();
}

KvCacheConfig channel_keys_config(size_t block_size, size_t num_blocks, size_t num_tails) {
  KvCacheConfig c = toy_config(block_size, num_blocks);
  c.spec.dtype = KvDType::kInt8;
  c.spec.key_scale_axis = KvScaleAxis::kPerChannel;
  c.num_key_tails = num_tails;
  return c;
}

std::unique_ptr<KvCacheManager> channel_keys_kv(size_t block_size, size_t num_blocks, size_t num_tails) {
  auto m = KvCacheManager::create(channel_keys_config(block_size, num_blocks, num_tails));
  KVS_ASSERT(m.has_value(), "{}", m.status().message());
  return std::move(m).value();
}

bool has_tail(const KvCacheManager& kv, SeqId seq, size_t block_index) {
  return kv.key_tail_table().tail_of(kv.block_table(seq)[block_index]) != kNoKeyTail;
}

// Reserves n tokens of `seq` and commits them, checking the invariants in between.
void step(KvCacheManager& kv, SeqId seq, size_t n) {
  ASSERT_TRUE(kv.reserve(seq, n));
  expect_invariants(kv);
  kv.commit(seq, toy_tokens(n, static_cast<TokenId>(kv.num_tokens(seq))));
  expect_invariants(kv);
}

TEST(KeyTails, AGroupHoldsATailFromItsFirstRowToItsLast) {
  const auto kv = channel_keys_kv(16, 8, 4);  // a group is a block
  const SeqId s{1};
  ASSERT_TRUE(kv->reserve(s, 5));
  EXPECT_TRUE(has_tail(*kv, s, 0));
  EXPECT_EQ(kv->usage().key_tails_used, 1u);
  kv->commit(s, toy_tokens(5));
  EXPECT_TRUE(has_tail(*kv, s, 0)) << "rows 0..4 wait in it";
  step(*kv, s, 11);  // 16: the group is complete and quantized
  EXPECT_FALSE(has_tail(*kv, s, 0));
  EXPECT_EQ(kv->usage().key_tails_used, 0u);
  step(*kv, s, 1);  // row 0 of block 1
  EXPECT_TRUE(has_tail(*kv, s, 1));
  EXPECT_EQ(kv->usage().key_tails_used, 1u);
}

TEST(KeyTails, GroupsWithinALargerBlockTakeTheirTailInTurn) {
  const auto kv = channel_keys_kv(64, 4, 4);  // four groups of 16 rows a block
  const SeqId s{1};
  step(*kv, s, 20);
  EXPECT_TRUE(has_tail(*kv, s, 0)) << "rows 16..19";
  step(*kv, s, 12);  // 32: group 1 complete
  EXPECT_FALSE(has_tail(*kv, s, 0));
  step(*kv, s, 1);  // group 2 starts
  EXPECT_TRUE(has_tail(*kv, s, 0));
  EXPECT_EQ(kv->usage().key_tails_used, 1u);
}

TEST(KeyTails, AStepIntoTheNextBlockHoldsTwoUntilItsCommit) {
  const auto kv = channel_keys_kv(16, 8, 4);
  const SeqId s{1};
  step(*kv, s, 10);
  ASSERT_TRUE(kv->reserve(s, 20));  // rows 10..15 of block 0 complete it, rows 0..13 of block 1 fill
  EXPECT_TRUE(has_tail(*kv, s, 0)) << "the write completes block 0's group from its tail";
  EXPECT_TRUE(has_tail(*kv, s, 1));
  EXPECT_EQ(kv->usage().key_tails_used, 2u);
  expect_invariants(*kv);
  kv->commit(s, toy_tokens(20, 10));
  EXPECT_FALSE(has_tail(*kv, s, 0));
  EXPECT_TRUE(has_tail(*kv, s, 1));
  EXPECT_EQ(kv->usage().key_tails_used, 1u);
  expect_invariants(*kv);
}

TEST(KeyTails, RunningOutRefusesAReserveWithNothingChanged) {
  const auto kv = channel_keys_kv(16, 8, 1);
  step(*kv, SeqId{1}, 5);
  EXPECT_FALSE(kv->can_reserve(SeqId{2}, 5));
  EXPECT_FALSE(kv->reserve(SeqId{2}, 5));
  EXPECT_FALSE(kv->contains(SeqId{2}));
  EXPECT_EQ(kv->usage().blocks_used, 1u);
  EXPECT_FALSE(kv->begin(SeqId{3}, toy_tokens(7), 0, PrefixMatch{}, 7));
  EXPECT_FALSE(kv->contains(SeqId{3}));
  EXPECT_TRUE(kv->can_reserve(SeqId{2}, 32)) << "whole groups need no tail";
  step(*kv, SeqId{2}, 32);
  kv->free(SeqId{1});
  EXPECT_EQ(kv->usage().key_tails_used, 0u);
  EXPECT_TRUE(kv->reserve(SeqId{2}, 1));
  expect_invariants(*kv);
}

TEST(KeyTails, ACopyOnWriteCopiesTheTailAndFreedBlocksGiveTheirsBack) {
  const auto kv = channel_keys_kv(16, 8, 4);
  step(*kv, SeqId{1}, 10);
  const uint32_t shared_tail = kv->key_tail_table().tail_of(kv->block_table(SeqId{1})[0]);
  kv->fork(SeqId{1}, SeqId{2});
  kv->fork(SeqId{1}, SeqId{3});
  EXPECT_EQ(kv->usage().key_tails_used, 1u) << "the shared block's tail is shared with it";
  expect_invariants(*kv);
  ASSERT_TRUE(kv->reserve(SeqId{2}, 1));
  ASSERT_EQ(kv->pending_copies().size(), 1u);
  const KvBlockCopy copy = kv->pending_copies()[0];
  EXPECT_EQ(copy.source_tail, shared_tail);
  EXPECT_NE(copy.destination_tail, kNoKeyTail);
  EXPECT_NE(copy.destination_tail, shared_tail);
  EXPECT_EQ(kv->key_tail_table().tail_of(copy.destination), copy.destination_tail);
  EXPECT_EQ(kv->usage().key_tails_used, 2u);
  expect_invariants(*kv);
  // The last two holders: 1 is freed while a copy still reads the shared block, so its tail stays
  // until the copies are done; then 3 holds the block and its tail alone.
  kv->free(SeqId{1});
  EXPECT_EQ(kv->key_tail_table().tail_of(copy.source), shared_tail);
  kv->copies_done();
  EXPECT_EQ(kv->key_tail_table().tail_of(copy.source), shared_tail);
  expect_invariants(*kv);
  kv->free(SeqId{3});
  EXPECT_EQ(kv->key_tail_table().tail_of(copy.source), kNoKeyTail);
  kv->free(SeqId{2});
  EXPECT_EQ(kv->usage().key_tails_used, 0u);
  expect_invariants(*kv);
}

TEST(KeyTails, OnlyKeysQuantizedPerChannelHaveThem) {
  KvCacheConfig none = channel_keys_config(16, 8, 0);
  auto refused = KvCacheManager::create(none);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("num_key_tails"), std::string::npos) << refused.status().message();
  KvCacheConfig per_token = channel_keys_config(16, 8, 4), float_keys = per_token;
  per_token.spec.key_scale_axis = KvScaleAxis::kPerToken;
  float_keys.spec.dtype = {KvDType::kF16, KvDType::kInt8};
  for (const KvCacheConfig& c : {per_token, float_keys}) {
    auto m = KvCacheManager::create(c);
    ASSERT_TRUE(m) << m.status().message();
    EXPECT_EQ((*m)->key_tail_table().num_tails(), 0u);
    step(**m, SeqId{1}, 5);
    EXPECT_EQ((*m)->usage().key_tails_used, 0u);
  }
}

}  // namespace
}  // namespace kvs::test
