// A KV manager with a sliding window: blocks wholly before the window of a sequence's next token are let
// go the moment the window passes them, so the blocks held follow the window exactly (asserted at every
// step of a 5,000-token generation, for windows below, at and above the block size); a prefill chunk
// longer than the window keeps every block its own tokens read; a prefix hit takes only the blocks its
// first computed token reads, and a fork shares the window.
#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"
#include "toy_kv.h"

namespace kvs::test {
namespace {

void expect_invariants(const KvCacheManager& kv) {
  const Status s = kv.check_invariants();
  ASSERT_TRUE(s.is_ok()) << s.message();
}

std::unique_ptr<KvCacheManager> windowed_kv(size_t block_size, size_t num_blocks, size_t window,
                                            bool prefix_caching = true) {
  KvCacheConfig config = toy_config(block_size, num_blocks);
  config.layer_window = window;
  config.prefix_caching = prefix_caching;
  auto m = KvCacheManager::create(config);
  KVS_ASSERT(m.has_value(), "windowed KV manager refused: {}", m.status().message());
  return std::move(m).value();
}

// Blocks a sequence of n committed tokens holds under a window: those intersecting (n - window, n], the
// positions its next token (at n) reads, of the ceil(n / block size) it has written into.
size_t expected_blocks(size_t n, size_t block_size, size_t window) {
  const size_t written = (n + block_size - 1) / block_size;
  const size_t first_read = n + 1 > window ? n + 1 - window : 0;
  return written - std::min(written, first_read / block_size);
}

TEST(SlidingWindowKv, HeldBlocksFollowTheWindowAtEveryStepOf5000Tokens) {
  const size_t block_size = 16;
  for (size_t window : {3, 16, 17, 100, 512}) {
    const auto kv = windowed_kv(block_size, 64, window, /*prefix_caching=*/false);
    const auto tokens = toy_tokens(5000);
    const SeqId seq{1};
    // A prompt of 40 tokens in one chunk, then one token at a time.
    ASSERT_TRUE(kv->reserve(seq, 40));
    kv->commit(seq, std::span(tokens).first(40));
    for (size_t n = 40; n < tokens.size(); ++n) {
      ASSERT_EQ(kv->usage().blocks_used, expected_blocks(n, block_size, window)) << "window " << window << " n " << n;
      ASSERT_EQ(kv->usage().bytes_used, kv->usage().blocks_used * kv_bytes_per_block(kv->config().spec).total());
      if (n % 97 == 0) expect_invariants(*kv);
      ASSERT_TRUE(kv->reserve(seq, 1)) << "window " << window << " n " << n;
      // The token's own slot and every slot its window reads are in held blocks.
      const std::span<const BlockId> table = kv->block_table(seq);
      const size_t first_read = n + 1 > window ? n + 1 - window : 0;
      for (size_t p = first_read; p <= n; p += 1) ASSERT_NE(table[p / block_size], kNullBlock) << "position " << p;
      kv->commit(seq, std::span(tokens).subspan(n, 1));
    }
    EXPECT_LE(kv->pool().peak_used_blocks(), expected_blocks(40, block_size, window) + (window + 30) / block_size + 2);
    kv->free(SeqId{1});
    EXPECT_EQ(kv->pool().num_used_blocks(), 0u);
    expect_invariants(*kv);
  }
}

// A chunk of 50 tokens after 30 with a window of 8: the chunk's first token reads from position 23, so
// the blocks of positions [23, 80) are all held while the chunk is computed; after its commit the next
// token reads from 73.
TEST(SlidingWindowKv, AChunkLongerThanTheWindowHoldsWhatItsFirstTokenReads) {
  const auto kv = windowed_kv(4, 64, 8, false);
  const auto tokens = toy_tokens(80);
  const SeqId seq{1};
  ASSERT_TRUE(kv->reserve(seq, 30));
  kv->commit(seq, std::span(tokens).first(30));
  EXPECT_EQ(kv->usage().blocks_used, expected_blocks(30, 4, 8));  // blocks 5..7 (positions 20..31)
  ASSERT_TRUE(kv->reserve(seq, 50));
  const std::span<const BlockId> table = kv->block_table(seq);
  for (size_t p = 23; p < 80; ++p) EXPECT_NE(table[p / 4], kNullBlock) << p;
  for (size_t b = 0; b < 5; ++b) EXPECT_EQ(table[b], kNullBlock) << b;
  kv->commit(seq, std::span(tokens).subspan(30, 50));
  EXPECT_EQ(kv->usage().blocks_used, 2u);  // positions 73..79: blocks 18 and 19
  expect_invariants(*kv);
}

// A finished sequence's blocks stay cached; a new one with the same 100-token prefix (window 10, blocks
// of 4) is confirmed block by block but takes only blocks 22..24, which its first computed token (at 100)
// reads ((90, 100]); the blocks before are holes, and nothing before the window is pinned.
TEST(SlidingWindowKv, APrefixHitTakesOnlyTheBlocksItsWindowReads) {
  const auto kv = windowed_kv(4, 64, 10);
  const auto tokens = toy_tokens(110);
  const auto prefix = std::span(tokens).first(100);
  const PrefixMatch none = kv->match_prefix(prefix, 0);
  ASSERT_TRUE(kv->begin(SeqId{1}, prefix, 0, none, prefix.size()));
  kv->commit(SeqId{1}, prefix);
  kv->free(SeqId{1});
  EXPECT_EQ(kv->pool().num_used_blocks(), 0u);
  const PrefixMatch hit = kv->match_prefix(tokens, 0);
  EXPECT_EQ(hit.num_tokens(4), 100u);  // 25 full blocks: the chain is still all cached
  ASSERT_TRUE(kv->begin(SeqId{2}, tokens, 0, hit, 10));
  const std::span<const BlockId> table = kv->block_table(SeqId{2});
  for (size_t b = 0; b < 22; ++b) EXPECT_EQ(table[b], kNullBlock) << b;
  for (size_t b = 22; b < 25; ++b) EXPECT_EQ(table[b], hit.blocks[b]) << b;
  EXPECT_EQ(kv->pool().num_used_blocks(), 3u + 3u);  // 3 shared, 3 fresh for positions 100..109
  expect_invariants(*kv);
  kv->commit(SeqId{2}, std::span(tokens).subspan(100, 10));
  expect_invariants(*kv);
  // A fork shares the window: same holes, same blocks.
  kv->fork(SeqId{2}, SeqId{3});
  EXPECT_EQ(ids(kv->block_table(SeqId{3})), ids(kv->block_table(SeqId{2})));
  expect_invariants(*kv);
}

}  // namespace
}  // namespace kvs::test
