// The attention types (kv/attention_types/): full attention skips only what a sequence's own window passed; a sliding
// window skips what the narrower of its layer window and the sequence's passed. On one index of a four-block chain
// whose first block is then taken for new content, full attention finds nothing (its chain breaks at block 0) and a
// sliding window of two blocks finds the blocks its window reads, holes before them, and a partial block after.
#include <gtest/gtest.h>

#include "kv/attention_types/full_attention.h"
#include "kv/attention_types/sliding_window.h"
#include "toy_kv.h"

namespace kvs::test {
namespace {

TEST(AttentionTypes, WhatEachSkips) {
  const auto full = make_kv_attention_type(0);
  const auto window = make_kv_attention_type(32);
  EXPECT_EQ(full->layer_window(), 0u);
  EXPECT_EQ(window->layer_window(), 32u);
  for (size_t position : {0u, 15u, 31u, 32u, 47u, 48u, 100u, 1000u}) {
    SCOPED_TRACE(position);
    EXPECT_EQ(full->blocks_skipped(position, 0, 16), 0u) << "full attention reads everything";
    // Position p reads (p - w, p]: the blocks wholly before p - w + 1.
    const auto before = [&](size_t w) { return position + 1 <= w ? 0 : (position + 1 - w) / 16; };
    EXPECT_EQ(full->blocks_skipped(position, 20, 16), before(20)) << "a sequence's own window";
    EXPECT_EQ(window->blocks_skipped(position, 0, 16), before(32));
    EXPECT_EQ(window->blocks_skipped(position, 20, 16), before(20)) << "the narrower window";
    EXPECT_EQ(window->blocks_skipped(position, 64, 16), before(32)) << "the narrower window";
  }
}

class AttentionTypeMatch : public ::testing::Test {
 protected:
  static constexpr size_t kBlock = 4;
  AttentionTypeMatch() : pool_(8), index_(8), tokens_(toy_tokens(4 * kBlock + 3, 7)) {
    // A chain of four full blocks 0..3 and a partial block 4 of two tokens under block 3.
    BlockHash parent = root();
    ContentRef parent_ref = ContentRef::root(0);
    auto blocks = pool_.allocate(5);
    KVS_ASSERT(blocks.has_value(), "a pool of 8 gives 5 blocks");
    for (size_t i = 0; i < 4; ++i) {
      const auto block_tokens = std::span(tokens_).subspan(i * kBlock, kBlock);
      parent = chain_block_hash(parent, block_tokens);
      index_.add_full(BlockId{static_cast<uint32_t>(i)}, parent, parent_ref, block_tokens);
      parent_ref = {static_cast<uint32_t>(i), pool_.meta(BlockId{static_cast<uint32_t>(i)}).generation};
    }
    index_.add_partial(BlockId{4}, parent_ref, std::span(tokens_).subspan(4 * kBlock, 2));
  }
  static BlockHash root() { return prefix_root_hash("toy", ""); }
  PrefixLookup lookup() {
    return {.tokens = tokens_,
            .root = root(),
            .limit = tokens_.size() - 1,
            .block_size = kBlock,
            .index = &index_,
            .pool = &pool_};
  }
  BlockPool pool_;
  PrefixIndex index_;
  std::vector<TokenId> tokens_;
};

TEST_F(AttentionTypeMatch, FullAttentionTakesTheWholeChainAndThePartialBlock) {
  const PrefixMatch m = make_kv_attention_type(0)->longest_cached_prefix(lookup());
  EXPECT_EQ(m.blocks, (std::vector<BlockId>{BlockId{0}, BlockId{1}, BlockId{2}, BlockId{3}}));
  EXPECT_EQ(m.partial_source, BlockId{4});
  EXPECT_EQ(m.partial_tokens, 2u);
  EXPECT_EQ(m.num_tokens(kBlock), 18u);
}

TEST_F(AttentionTypeMatch, WithTheFirstBlockGoneOnlyASlidingWindowStillMatches) {
  index_.erase(BlockId{0});
  const PrefixMatch full = make_kv_attention_type(0)->longest_cached_prefix(lookup());
  EXPECT_EQ(full.num_tokens(kBlock), 0u) << "the chain breaks at its first block";
  // A window of 8 tokens (two blocks): the match's blocks as of position 16, which reads 9..16: blocks 2, 3 and 4.
  const PrefixMatch windowed = make_kv_attention_type(2 * kBlock)->longest_cached_prefix(lookup());
  EXPECT_EQ(windowed.blocks, (std::vector<BlockId>{kNullBlock, kNullBlock, BlockId{2}, BlockId{3}}));
  EXPECT_EQ(windowed.hashes.size(), 4u) << "every block's chained hash, holes included";
  EXPECT_EQ(windowed.partial_source, BlockId{4});
  EXPECT_EQ(windowed.num_tokens(kBlock), 18u);
  // A window of 12 tokens needs block 1 too, which is there, and block 0 is still before it.
  const PrefixMatch wider = make_kv_attention_type(3 * kBlock)->longest_cached_prefix(lookup());
  EXPECT_EQ(wider.blocks, (std::vector<BlockId>{kNullBlock, BlockId{1}, BlockId{2}, BlockId{3}}));
  // A window of 16 tokens reads block 0 from every whole-block prefix: nothing to take.
  EXPECT_EQ(make_kv_attention_type(4 * kBlock)->longest_cached_prefix(lookup()).num_tokens(kBlock), 0u);
}

}  // namespace
}  // namespace kvs::test
