#include "kv/block_pool.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

std::vector<uint32_t> ids(const std::vector<BlockId>& blocks) {
  std::vector<uint32_t> out;
  for (BlockId b : blocks) out.push_back(b.value);
  return out;
}

TEST(BlockPool, AllocatesFromTheHeadInOrder) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.check_invariants().is_ok());
  auto a = pool.allocate(2);
  ASSERT_TRUE(a);
  EXPECT_EQ(ids(*a), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(pool.num_free_blocks(), 2u);
  EXPECT_EQ(pool.meta(BlockId{0}).ref_count, 1u);
  ASSERT_TRUE(pool.check_invariants().is_ok());
}

// Blocks that hold cached content go to the tail (LRU: the head is evicted first); empty ones to the
// head, to be reused before any cached block.
TEST(BlockPool, ReleasedCachedBlocksGoToTheTailEmptyOnesToTheHead) {
  BlockPool pool(4);
  auto a = *pool.allocate(3);  // 0 1 2; free: 3
  for (BlockId b : a) pool.set_content_hash(b, 100 + b.value);
  pool.release(BlockId{1});
  ASSERT_TRUE(pool.check_invariants().is_ok());
  pool.release(BlockId{0});
  ASSERT_TRUE(pool.check_invariants().is_ok());
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{3, 1, 0}));
  EXPECT_LT(pool.meta(BlockId{1}).last_access, pool.meta(BlockId{0}).last_access);
  EXPECT_EQ(pool.num_cached_free_blocks(), 2u);
  auto b = *pool.allocate(2);
  EXPECT_EQ(ids(b), (std::vector<uint32_t>{3, 1}));
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{0}));
  EXPECT_EQ(pool.meta(BlockId{1}).content_hash, 0u) << "taking a cached block evicts its content";
  EXPECT_EQ(pool.meta(BlockId{1}).generation, 2u);
  EXPECT_EQ(pool.num_cached_free_blocks(), 1u);
  pool.release(BlockId{3});  // empty: to the head
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{3, 0}));
  ASSERT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, ExhaustionIsAllOrNothing) {
  BlockPool pool(3);
  auto a = pool.allocate(2);
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.allocate(2));
  EXPECT_EQ(pool.num_free_blocks(), 1u);  // unchanged
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(pool.allocate(1));
  EXPECT_FALSE(pool.allocate(1));
  EXPECT_TRUE(pool.allocate(0));
  ASSERT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, RetainPullsAFreeBlockOutOfTheMiddleOfTheList) {
  BlockPool pool(4);
  auto a = *pool.allocate(4);
  for (BlockId b : a) pool.set_content_hash(b, 7);
  for (uint32_t i : {2u, 0u, 3u}) pool.release(BlockId{i});
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{2, 0, 3}));
  pool.retain(BlockId{0});  // a cached block reused by a prefix hit
  ASSERT_TRUE(pool.check_invariants().is_ok());
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{2, 3}));
  pool.retain(BlockId{0});
  EXPECT_EQ(pool.meta(BlockId{0}).ref_count, 2u);
  pool.release(BlockId{0});
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{2, 3}));
  pool.release(BlockId{0});
  EXPECT_EQ(ids(pool.free_list()), (std::vector<uint32_t>{2, 3, 0}));
  ASSERT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, AllocationClearsCachedContentHash) {
  BlockPool pool(1);
  auto a = *pool.allocate(1);
  pool.set_content_hash(a[0], 1234);
  pool.release(a[0]);
  EXPECT_EQ(pool.meta(a[0]).content_hash, 1234u);
  auto b = *pool.allocate(1);
  EXPECT_EQ(pool.meta(b[0]).content_hash, 0u);
}

TEST(BlockPoolDeathTest, DoubleReleaseIsABug) {
  BlockPool pool(2);
  auto a = *pool.allocate(1);
  pool.release(a[0]);
  EXPECT_DEATH(pool.release(a[0]), "release of free block 0");
}

}  // namespace
}  // namespace kvs
