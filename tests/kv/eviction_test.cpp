// The KV library's side of eviction: the policies' kept sets (exact slots), their parameters, the slot scores
// (fixed point, compaction, positions), and the KV manager's evict() with exact block ids (the blocks past the
// kept slots go back at once, tail first, and a sequence under a policy never indexes or shares a block).
#include <gtest/gtest.h>

#include <numeric>

#include "kv/policies/kv_policy.h"
#include "kv/policies/slot_scores.h"
#include "toy_kv.h"

namespace kvs {
namespace {

using test::ids;
using test::toy_kv;
using test::toy_tokens;

std::vector<uint32_t> kept_by(const KvPolicyParams& params, size_t num_slots, std::vector<double> scores = {}) {
  const KvPolicyParams p = params.resolved(4);
  EXPECT_TRUE(p.validate(512).is_ok()) << p.validate(512).message();
  std::vector<uint32_t> kept;
  make_kv_eviction_policy(p)->select(num_slots, scores, kept);
  return kept;
}

TEST(KvPolicy, EachKeepsItsSlots) {
  // Budget 12, evictions of a block of 4: 8 of the 12 stay.
  EXPECT_EQ(kept_by({.kind = KvPolicyKind::kWindow, .budget = 12}, 12),
            (std::vector<uint32_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(kept_by({.kind = KvPolicyKind::kSinks, .budget = 12, .sinks = 2}, 12),
            (std::vector<uint32_t>{0, 1, 6, 7, 8, 9, 10, 11}));
  // Heavy hitters: 3 recent, 1 sink, and the 4 best scores among slots 1..8; a tie goes to the older slot.
  const std::vector<double> scores = {0, 5, 1, 9, 3, 3, 0, 7, 2, 100, 100, 100};
  EXPECT_EQ(kept_by({.kind = KvPolicyKind::kHeavyHitters, .budget = 12, .sinks = 1, .recent = 3}, 12, scores),
            (std::vector<uint32_t>{0, 1, 3, 4, 7, 9, 10, 11}));
  EXPECT_EQ(kept_by({.kind = KvPolicyKind::kHeavyHitters, .budget = 12, .sinks = 0, .recent = 8}, 12, scores),
            kept_by({.kind = KvPolicyKind::kWindow, .budget = 12}, 12))
      << "with every kept slot recent, heavy hitters are a window";
}

TEST(KvPolicy, DefaultsNamesAndRefusals) {
  const KvPolicyParams sinks = KvPolicyParams{.kind = KvPolicyKind::kSinks, .budget = 64}.resolved(16);
  EXPECT_EQ(sinks.sinks, 4u);
  EXPECT_EQ(sinks.evict_unit, 16u);
  EXPECT_EQ(sinks.keep(), 48u);
  const KvPolicyParams h2o = KvPolicyParams{.kind = KvPolicyKind::kHeavyHitters, .budget = 64}.resolved(16);
  EXPECT_EQ(h2o.sinks, 0u);
  EXPECT_EQ(h2o.recent, 32u);
  EXPECT_EQ(h2o.describe(), "h2o (budget 64, 32 recent, 0 sinks, attention per layer and KV head)");
  for (KvPolicyKind k : {KvPolicyKind::kFull, KvPolicyKind::kWindow, KvPolicyKind::kSinks, KvPolicyKind::kHeavyHitters})
    EXPECT_EQ(*parse_kv_policy_kind(kv_policy_name(k)), k);
  EXPECT_NE(parse_kv_policy_kind("lru").status().message().find("'lru'"), std::string::npos);
  const auto refuses = [](KvPolicyParams p, const std::string& says) {
    const Status s = p.resolved(16).validate(512);
    EXPECT_FALSE(s.is_ok()) << says;
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  refuses({.kind = KvPolicyKind::kSinks}, "needs a budget");
  refuses({.kind = KvPolicyKind::kSinks, .budget = 1024}, "exceeds the model's context of 512");
  refuses({.kind = KvPolicyKind::kWindow, .budget = 64, .sinks = 2}, "keeps no sinks");
  refuses({.kind = KvPolicyKind::kSinks, .budget = 16}, "keeps no recent token");
  refuses({.kind = KvPolicyKind::kSinks, .budget = 20, .sinks = 4}, "keeps no recent token");
}

// Fixed-point mass per row, moved with its slots on compaction; scores in total or per query since written.
TEST(SlotScores, CompactionMovesMassAndPositions) {
  constexpr auto kOne = static_cast<uint64_t>(kSlotMassOne);
  SlotScores scores(1, 2, 8);
  SlotMass view = scores.view();
  for (uint64_t s = 0; s < 6; ++s) {
    view.row(0, 0)[s] = (s + 1) * kOne;  // row 0: 1, 2, ..., 6
    view.row(0, 1)[s] = 10 * kOne;
  }
  scores.stamp(6, 0);  // slot s holds position s
  std::vector<double> total, per_query;
  scores.scores(0, false, 6, 6, false, total);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(total[i], double(i + 1) * kSlotMassOne);
  scores.scores(0, false, 6, 6, true, per_query);
  EXPECT_EQ(per_query[0], kSlotMassOne / 6);  // 1 over the 6 queries since position 0
  EXPECT_EQ(per_query[5], 6 * kSlotMassOne);  // 6 over its one query
  scores.scores(0, true, 6, 6, false, total);
  EXPECT_EQ(total[2], 13 * kSlotMassOne) << "pooled: every row summed";
  // Row 0 keeps slots 1 and 4, row 1 keeps 0 and 5 (4 of 6 evicted); a new slot 2 then holds position 6.
  const std::vector<std::vector<uint32_t>> kept = {{1, 4}, {0, 5}};
  scores.compact(kept);
  EXPECT_EQ(scores.row(0)[0], 2 * kOne);
  EXPECT_EQ(scores.row(0)[1], 5 * kOne);
  EXPECT_EQ(scores.row(0)[2], 0u);
  scores.stamp(3, 4);
  scores.scores(0, false, 3, 7, true, per_query);
  EXPECT_EQ(per_query[0], 2 * kSlotMassOne / 6);  // position 1: 6 queries of the 7 tokens computed
  EXPECT_EQ(per_query[1], 5 * kSlotMassOne / 3);  // position 4
  EXPECT_EQ(per_query[2], 0.0);                   // position 6: nothing yet
}

// evict(): slots compacted by the caller, the blocks past them go back (tail first), the next token's slot
// follows the kept ones, nothing is indexed; a table under a policy is never forked.
TEST(KvCacheManagerEviction, EvictReturnsTheBlocksPastTheKeptSlots) {
  const auto owned = toy_kv(4, 8);
  KvCacheManager& kv = *owned;
  const std::vector<TokenId> tokens = toy_tokens(10, 50);
  ASSERT_TRUE(kv.begin(SeqId{1}, tokens, 0, {}, 10, 0, /*evicts=*/true));
  kv.commit(SeqId{1}, tokens);
  EXPECT_EQ(ids(kv.block_table(SeqId{1})), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(kv.prefix_index().num_entries(), 0u) << "a sequence under a policy indexes nothing";
  kv.evict(SeqId{1}, 6);  // 4 slots stay: block 0
  EXPECT_EQ(kv.num_tokens(SeqId{1}), 10u);
  EXPECT_EQ(kv.num_slots(SeqId{1}), 4u);
  EXPECT_EQ(kv.num_evicted(SeqId{1}), 6u);
  EXPECT_EQ(ids(kv.block_table(SeqId{1})), (std::vector<uint32_t>{0}));
  EXPECT_EQ(kv.usage().blocks_used, 1u);
  EXPECT_EQ(kv.num_evicted_total(), 6u);
  ASSERT_TRUE(kv.reserve(SeqId{1}, 1));
  const BlockId next = kv.block_table(SeqId{1})[1];
  EXPECT_EQ(kv.slot_of(SeqId{1}, 10).value, next.value * 4) << "position 10 goes to slot 4";
  kv.commit(SeqId{1}, toy_tokens(1, 60));
  ASSERT_TRUE(kv.check_invariants().is_ok()) << kv.check_invariants().message();
  EXPECT_DEATH(kv.fork(SeqId{1}, SeqId{2}), "under an eviction policy, is forked");
  kv.free(SeqId{1});
  EXPECT_EQ(kv.usage().blocks_used, 0u);
  EXPECT_EQ(kv.prefix_index().num_entries(), 0u) << "not even its partial last block";
}

}  // namespace
}  // namespace kvs
