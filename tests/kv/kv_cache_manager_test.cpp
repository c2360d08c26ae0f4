#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "toy_kv.h"

namespace kvs {
namespace {

using test::ids;
using test::toy_config;
using test::toy_kv;
using test::toy_tokens;

TEST(KvCacheManager, AllocatesOnDemandAndMapsPositionsToSlots) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  const SeqId a{1}, b{2};
  ASSERT_TRUE(kv.reserve(a, 5));  // 2 blocks: 0, 1
  kv.commit(a, toy_tokens(5));
  ASSERT_TRUE(kv.reserve(b, 3));  // 1 block: 2
  kv.commit(b, toy_tokens(3));
  ASSERT_TRUE(kv.reserve(a, 3));  // 8 tokens still fit in 2 blocks
  EXPECT_EQ(ids(kv.block_table(a)), (std::vector<uint32_t>{0, 1}));
  kv.commit(a, toy_tokens(3));
  ASSERT_TRUE(kv.reserve(a, 1));  // the 9th token needs block 3
  kv.commit(a, toy_tokens(1));
  EXPECT_EQ(ids(kv.block_table(a)), (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(ids(kv.block_table(b)), (std::vector<uint32_t>{2}));
  EXPECT_EQ(kv.slot_of(a, 0).value, 0u);
  EXPECT_EQ(kv.slot_of(a, 5).value, 1u * 4 + 1);
  EXPECT_EQ(kv.slot_of(a, 8).value, 3u * 4 + 0);
  EXPECT_EQ(kv.slot_of(b, 2).value, 2u * 4 + 2);
  ASSERT_TRUE(kv.check_invariants().is_ok()) << kv.check_invariants().message();
  EXPECT_EQ(kv.tokens(a).size(), 9u);
  EXPECT_EQ(kv.tokens(a)[5], 0) << "the ids of each commit, in order";  // commits of 5, 3, 1 ids from 0
  EXPECT_EQ(kv.tokens(a)[8], 0);
  EXPECT_EQ(kv.tokens(a)[7], 2);
  kv.free(a);  // all blocks back at once, the tail first: the head (longest prefix) is evicted last
  EXPECT_EQ(kv.usage().blocks_used, 1u);
  EXPECT_EQ(kv.num_tokens(a), 0u);
  EXPECT_EQ(ids(kv.pool().free_list()), (std::vector<uint32_t>{4, 5, 6, 7, 3, 1, 0}));
  ASSERT_TRUE(kv.check_invariants().is_ok());
}

TEST(PinnedBlocks, HoldReferencesAndReleaseTailFirst) {
  BlockPool pool(6);
  {
    PinnedBlocks a(pool, *pool.allocate(3));                   // 0 1 2
    for (BlockId b : a.blocks()) pool.set_content_hash(b, 1);  // cached content: released to the tail
    EXPECT_EQ(pool.num_used_blocks(), 3u);
    PinnedBlocks shared = PinnedBlocks::retain(pool, a.blocks().first(2));  // 0 and 1 shared
    EXPECT_EQ(pool.meta(BlockId{0}).ref_count, 2u);
    a.append_hole();
    EXPECT_EQ(a.size(), 4u);
    PinnedBlocks moved = std::move(a);
    EXPECT_EQ(a.size(), 0u);
    moved.release();  // 2 goes back; 0 and 1 are still shared
    EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{3, 4, 5, 2}));
    ASSERT_TRUE(pool.check_invariants().is_ok());
  }  // `shared` dies: 1, then 0
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{3, 4, 5, 2, 1, 0}));
  ASSERT_TRUE(pool.check_invariants().is_ok());
}

// A sequence's own count of computed tokens is the manager's; a sequence without blocks has computed none.
TEST(KvCacheManager, ComputedCountIsTheCommittedTokens) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  EXPECT_EQ(kv.num_tokens(SeqId{9}), 0u);
  ASSERT_TRUE(kv.reserve(SeqId{9}, 6));
  EXPECT_EQ(kv.num_tokens(SeqId{9}), 0u) << "reserved is not computed";
  kv.commit(SeqId{9}, toy_tokens(6, 100));
  EXPECT_EQ(kv.num_tokens(SeqId{9}), 6u);
  EXPECT_EQ(kv.tokens(SeqId{9}).back(), 105);
  EXPECT_DEATH(kv.commit(SeqId{9}, toy_tokens(3)), "advance to 9 slots with only 2 blocks of 4");
}

TEST(KvCacheManager, ExhaustionLeavesEverythingUnchanged) {
  const auto owned = toy_kv(2, 3);
  KvCacheManager& kv = *owned;
  ASSERT_TRUE(kv.reserve(SeqId{1}, 4));
  EXPECT_FALSE(kv.can_reserve(SeqId{2}, 3));
  EXPECT_FALSE(kv.reserve(SeqId{2}, 3));
  EXPECT_FALSE(kv.contains(SeqId{2}));
  EXPECT_EQ(kv.usage().blocks_used, 2u);
  EXPECT_TRUE(kv.reserve(SeqId{2}, 2));
  ASSERT_TRUE(kv.check_invariants().is_ok());
}

TEST(KvCacheManager, UsageBytesFollowTheSizingFunction) {
  auto m = KvCacheManager::create(toy_config(4, 8));
  ASSERT_TRUE(m);
  const size_t per_block = kv_bytes_per_block(toy_config(4, 8).spec).total();
  EXPECT_EQ(per_block, 2u * 2 * 4 * 2 * 4 * sizeof(float));  // layers x K,V x heads x slots x dim x 4
  EXPECT_EQ((*m)->usage().bytes_total, 8 * per_block);
  ASSERT_TRUE((*m)->reserve(SeqId{7}, 6));
  EXPECT_EQ((*m)->usage().bytes_used, 2 * per_block);
}

TEST(KvCacheManager, ConfigErrorsNameTheValue) {
  auto bad = KvCacheManager::create(toy_config(3, 8));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("got 3"), std::string::npos) << bad.status().message();
  auto empty = KvCacheManager::create(toy_config(16, 0));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().code(), ErrorCode::kOutOfMemory);
}

// Thousands of random sequences growing, and ending, with the invariants checked at every step.
TEST(KvCacheManager, RandomizedStressKeepsInvariants) {
  for (size_t block_size : {1u, 4u, 16u}) {
    const auto owned = toy_kv(block_size, 64);
    KvCacheManager& kv = *owned;
    std::mt19937_64 rng(block_size);
    std::map<uint64_t, size_t> lengths;  // our own model of what each sequence holds
    uint64_t next_id = 0;
    size_t refused = 0;
    for (int step = 0; step < 4000; ++step) {
      const int action = static_cast<int>(rng() % 10);
      if (action < 3 || lengths.empty()) {
        const SeqId id{next_id++};
        const size_t n = 1 + rng() % 40;
        if (kv.reserve(id, n)) {
          kv.commit(id, toy_tokens(n));
          lengths[id.value] = n;
        } else {
          ++refused;
          EXPECT_FALSE(kv.contains(id));
        }
      } else if (action < 8) {
        auto it = std::next(lengths.begin(), static_cast<long>(rng() % lengths.size()));
        const size_t n = 1 + rng() % 8;
        const size_t free_before = kv.pool().num_free_blocks();
        if (kv.reserve(SeqId{it->first}, n)) {
          kv.commit(SeqId{it->first}, toy_tokens(n));
          it->second += n;
        } else {
          ++refused;
          EXPECT_EQ(kv.pool().num_free_blocks(), free_before);
        }
      } else {
        auto it = std::next(lengths.begin(), static_cast<long>(rng() % lengths.size()));
        kv.free(SeqId{it->first});
        lengths.erase(it);
      }
      const Status s = kv.check_invariants();
      ASSERT_TRUE(s.is_ok()) << "step " << step << ": " << s.message();
      size_t blocks = 0;
      for (const auto& [id, len] : lengths) {
        ASSERT_EQ(kv.num_tokens(SeqId{id}), len);
        blocks += kv_blocks_for_tokens(len, block_size);
      }
      ASSERT_EQ(kv.usage().blocks_used, blocks) << "step " << step;
    }
    EXPECT_GT(refused, 0u) << "the stress test should reach exhaustion";
    for (const auto& [id, len] : lengths) kv.free(SeqId{id});
    EXPECT_EQ(kv.usage().blocks_used, 0u);
  }
}

}  // namespace
}  // namespace kvs
