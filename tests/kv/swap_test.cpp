// Swap preemption in the KV manager (kv_cache_manager.h swap_out), with a toy pool and a real host tier:
// a swapped-out sequence's blocks (its partial last one too) are asked to be kept, stay pinned in the host
// tier while the pool and the tier fill with others, and its prefix match finds them all, full blocks and
// the partial one, loaded into fresh blocks; the pins go when it begins again or is freed; a host tier
// that cannot pin them all refuses the swap with nothing done. The bytes moved are those the transfers
// name (the offload planner's KV ops, as an executor applies them to a KvStorage), checked block by block.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "kv/kv_cache_manager.h"
#include "kv/tiers/kv_tier_stack.h"
#include "kv/tiers/offload_planner.h"
#include "toy_kv.h"

namespace kvs::test {
namespace {

void expect_invariants(const KvCacheManager& kv, const KvTierStack& tiers) {
  const Status s = kv.check_invariants();
  ASSERT_TRUE(s.is_ok()) << s.message();
  const Status t = tiers.check_invariants();
  ASSERT_TRUE(t.is_ok()) << t.message();
}

// A toy pool of 8 blocks of 4 tokens over a host tier of `host_blocks` blocks, and a stand-in for the
// pool's bytes: each block's content is a fill byte, the value written when its K/V were computed.
class SwapFixture {
 public:
  explicit SwapFixture(size_t host_blocks) : kv_(toy_kv(4, 8)) {
    format_ = tier_format(kv_->config().spec);
    auto stack = KvTierStack::create({.host_bytes = host_blocks * format_.block_bytes}, format_);
    KVS_ASSERT(stack.has_value(), "{}", stack.status().message());
    tiers_ = std::move(stack).value();
    kv_->attach_tiers(tiers_.get());
  }
  KvCacheManager& kv() { return *kv_; }
  KvTierStack& tiers() { return *tiers_; }

  // Begins `seq` from its prefix match, runs the transfers, computes the rest (its blocks get `fill`).
  PrefixMatch run(SeqId seq, std::span<const TokenId> tokens, std::byte fill) {
    const PrefixMatch m = kv_->match_prefix(tokens, 0);
    const size_t cached = m.num_tokens(kv_->block_size());
    EXPECT_TRUE(kv_->begin(seq, tokens, 0, m, tokens.size() - cached));
    transfers();
    kv_->copies_done();
    for (BlockId b : kv_->block_table(seq))
      if (!loaded_.contains(b.value)) bytes_[b.value] = fill;
    loaded_.clear();
    kv_->commit(seq, tokens.subspan(cached));
    return m;
  }
  // What the engine does with the pending transfers: the offload planner's byte moves, applied to one fill byte per
  // block and the host tier's slots.
  void transfers() {
    std::vector<KvOp> ops;
    plan_tier_transfers(kv_->pending_transfers(), *tiers_, ops);
    kv_->transfers_done();
    for (const KvOp& op : ops) {
      if (const auto* to_host = std::get_if<KvBlockToHost>(&op)) {
        std::ranges::fill(tiers_->host_slabs().slot(to_host->host_slot), bytes_[to_host->block.value]);
      } else if (const auto* to_block = std::get_if<KvHostToBlock>(&op)) {
        const std::span<const std::byte> slot = tiers_->host_slabs().slot(to_block->host_slot);
        ASSERT_TRUE(std::ranges::all_of(slot, [&](std::byte b) { return b == slot[0]; })) << "a block's bytes differ";
        bytes_[to_block->block.value] = slot[0];
        loaded_.insert(to_block->block.value);
      } else {
        FAIL() << "only moves between the pool and the host tier without a disk tier, op " << op.index();
      }
    }
  }
  std::byte bytes_of(BlockId b) const { return bytes_.at(b.value); }

 private:
  std::unique_ptr<KvCacheManager> kv_;
  TierFormat format_;
  std::unique_ptr<KvTierStack> tiers_;
  std::map<uint32_t, std::byte> bytes_;
  std::set<uint32_t> loaded_;
};

TEST(SwapPreemption, KeptBlocksSurviveAFullPoolAndTierAndComeBackWithThePartialBlock) {
  SwapFixture f(/*host_blocks=*/5);
  KvCacheManager& kv = f.kv();
  const auto tokens = toy_tokens(11, 100);  // 10 computed (blocks 0, 1 full; 2 tokens in block 2), 1 to come
  f.run(SeqId{1}, std::span(tokens).first(10), std::byte{1});
  EXPECT_EQ(kv.blocks_to_keep(SeqId{1}), 3u);
  ASSERT_TRUE(kv.swap_out(SeqId{1}));
  EXPECT_FALSE(kv.contains(SeqId{1}));
  ASSERT_EQ(kv.pending_transfers().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const KvBlockTransfer& t = kv.pending_transfers()[i];
    EXPECT_EQ(t.kind, KvBlockTransfer::Kind::kKeep);
    EXPECT_EQ(t.tokens, std::vector<TokenId>(tokens.begin() + 4 * i, tokens.begin() + std::min<size_t>(4 * i + 4, 10)));
  }
  f.transfers();
  EXPECT_EQ(f.tiers().host().num_pinned(), 3u);
  expect_invariants(kv, f.tiers());

  // Another sequence takes the whole pool (the old blocks are overwritten) and, demoted, fills the host
  // tier's two unpinned slots over and over: the kept blocks stay.
  for (TokenId round = 0; round < 3; ++round) {
    const auto other = toy_tokens(32, 1000 + 100 * round);
    f.run(SeqId{2}, other, std::byte{2});
    kv.free(SeqId{2});
  }
  EXPECT_EQ(f.tiers().host().stats().blocks_held, 5u);
  EXPECT_EQ(f.tiers().host().num_pinned(), 3u);
  expect_invariants(kv, f.tiers());

  // It resumes: everything it had computed comes back, two full blocks and two slots of the third.
  const PrefixMatch m = kv.match_prefix(tokens, 0);
  EXPECT_TRUE(m.blocks.empty()) << "the pool lost them";
  EXPECT_EQ(m.tier_hashes.size(), 2u);
  EXPECT_TRUE(m.partial_in_tier());
  EXPECT_EQ(m.num_tokens(kv.block_size()), 10u);
  ASSERT_TRUE(kv.begin(SeqId{1}, tokens, 0, m, 1));
  std::vector<KvBlockTransfer> loads;  // after the demotions of the blocks the pool hands it
  for (const KvBlockTransfer& t : kv.pending_transfers())
    if (t.kind == KvBlockTransfer::Kind::kLoad) loads.push_back(t);
  ASSERT_EQ(loads.size(), 3u);
  EXPECT_EQ(loads[2].tokens, std::vector<TokenId>(tokens.begin() + 8, tokens.begin() + 10));
  EXPECT_EQ(kv.pending_transfers().back().block, loads[2].block);
  EXPECT_EQ(f.tiers().host().num_pinned(), 3u) << "pinned for the loads, no longer for the swap";
  f.transfers();
  EXPECT_EQ(f.tiers().host().num_pinned(), 0u);
  for (BlockId b : kv.block_table(SeqId{1})) EXPECT_EQ(f.bytes_of(b), std::byte{1}) << "block " << b.value;
  EXPECT_EQ(kv.num_tokens(SeqId{1}), 10u);
  EXPECT_EQ(kv.prefix_stats().tier_hit_tokens, 10u);
  kv.commit(SeqId{1}, std::span(tokens).subspan(10));
  expect_invariants(kv, f.tiers());
}

TEST(SwapPreemption, FreeingASwappedSequenceReleasesItsPins) {
  SwapFixture f(4);
  const auto tokens = toy_tokens(9, 7);
  f.run(SeqId{1}, tokens, std::byte{1});
  ASSERT_TRUE(f.kv().swap_out(SeqId{1}));
  f.transfers();
  EXPECT_EQ(f.tiers().host().num_pinned(), 3u);
  f.kv().free(SeqId{1});  // ended while waiting (aborted)
  EXPECT_EQ(f.tiers().host().num_pinned(), 0u);
  EXPECT_EQ(f.tiers().host().stats().blocks_held, 3u) << "kept blocks stay cached, least recently used first";
  expect_invariants(f.kv(), f.tiers());
}

TEST(SwapPreemption, AHostTierThatCannotPinThemAllRefusesWithNothingDone) {
  SwapFixture f(4);
  KvCacheManager& kv = f.kv();
  const auto a = toy_tokens(12, 0), b = toy_tokens(8, 50);
  f.run(SeqId{1}, a, std::byte{1});
  f.run(SeqId{2}, b, std::byte{2});
  ASSERT_TRUE(kv.swap_out(SeqId{1}));  // 3 blocks: room for 1 more
  EXPECT_FALSE(kv.swap_out(SeqId{2})) << "3 pending keeps and 2 more do not fit in 4";
  EXPECT_TRUE(kv.contains(SeqId{2}));
  EXPECT_EQ(kv.pending_transfers().size(), 3u);
  f.transfers();
  EXPECT_FALSE(kv.swap_out(SeqId{2})) << "3 pinned";
  EXPECT_EQ(kv.num_tokens(SeqId{2}), 8u);
  kv.free(SeqId{2});
  expect_invariants(kv, f.tiers());
  // Nothing computed, or no tiers: nothing to keep.
  EXPECT_FALSE(kv.swap_out(SeqId{3}));
  const auto plain = toy_kv(4, 8);
  ASSERT_TRUE(plain->reserve(SeqId{1}, 5));
  plain->commit(SeqId{1}, toy_tokens(5));
  EXPECT_EQ(plain->blocks_to_keep(SeqId{1}), 0u);
  EXPECT_FALSE(plain->swap_out(SeqId{1}));
  EXPECT_TRUE(plain->contains(SeqId{1}));
}

}  // namespace
}  // namespace kvs::test
