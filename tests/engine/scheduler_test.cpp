// The scheduler with toy sequences and an accounting-only KV manager (no model, no tokenizer, no K/V
// bytes): token budget, chunked prefill, admission order, preemption from the back, recomputation
// after preemption, and out-of-memory for a sequence that cannot grow even alone.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

namespace kvs {
namespace {

struct Toy {
  std::unique_ptr<HybridKvManager> kv;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::unique_ptr<SequenceState>> seqs;
  std::vector<KvBlockCopy> last_copies;  // what the last step's admissions asked the engine to copy

  Toy(size_t block_size, size_t num_blocks, SchedulerConfig config, bool prefix_caching = true) {
    const KvCacheConfig group{.spec = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .block_size = block_size},
                              .num_blocks = num_blocks,
                              .prefix_caching = prefix_caching};
    auto m = HybridKvManager::create(std::span(&group, 1));
    EXPECT_TRUE(m) << m.status().message();
    kv = std::move(m).value();
    scheduler = std::make_unique<Scheduler>(config, *kv);
  }
  SequenceState* add(size_t prompt_tokens) {
    std::vector<TokenId> prompt(prompt_tokens);
    for (size_t i = 0; i < prompt_tokens; ++i) prompt[i] = static_cast<TokenId>(i + 1);
    seqs.push_back(std::make_unique<SequenceState>(SeqId{seqs.size() + 1}, std::move(prompt)));
    scheduler->add(seqs.back().get());
    return seqs.back().get();
  }
  // Runs a plan as the engine would: commits every chunk, and a chunk that completes "samples" one token.
  SchedulePlan step() {
    SchedulePlan plan = scheduler->schedule();
    last_copies.assign(kv->group(0).pending_copies().begin(), kv->group(0).pending_copies().end());
    kv->group(0).copies_done();  // the engine copies the slots of partial prefix hits here
    for (const ScheduledChunk& c : plan.chunks) {
      const bool completes = c.completes();
      scheduler->on_computed(c);
      if (completes) c.seq->tokens.push_back(7);
    }
    EXPECT_TRUE(kv->check_invariants().is_ok()) << kv->check_invariants().message();
    return plan;
  }
};

TEST(Scheduler, ChunkedPrefillUnderTheTokenBudgetThenDecode) {
  Toy toy(4, 64, {.max_batch_tokens = 8, .max_seqs = 4});
  SequenceState* a = toy.add(13);
  SchedulePlan p = toy.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 0u);
  EXPECT_EQ(p.chunks[0].num_tokens, 8u);
  EXPECT_EQ(toy.scheduler->num_computed(*a), 8u);
  p = toy.step();  // the last 5 prompt tokens: completes, so a token is sampled
  EXPECT_EQ(p.chunks[0].first, 8u);
  EXPECT_EQ(p.chunks[0].num_tokens, 5u);
  EXPECT_EQ(a->num_tokens(), 14u);
  p = toy.step();  // decode: one token
  EXPECT_EQ(p.chunks[0].num_tokens, 1u);
  EXPECT_EQ(toy.kv->num_tokens(a->id), 14u);
  EXPECT_EQ(toy.kv->group(0).tokens(a->id).front(), 1);
}

TEST(Scheduler, RunningFirstThenAdmissionInArrivalOrder) {
  Toy toy(4, 64, {.max_batch_tokens = 10, .max_seqs = 2});
  SequenceState* a = toy.add(6);
  SequenceState* b = toy.add(6);
  SequenceState* c = toy.add(2);
  SchedulePlan p = toy.step();  // a whole (6), b's first 4; c waits (max_seqs 2)
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(p.chunks[1].seq, b);
  EXPECT_EQ(p.chunks[1].num_tokens, 4u);
  EXPECT_EQ(toy.scheduler->waiting().front(), c);
  toy.scheduler->remove(a);
  p = toy.step();  // b's decode... b's last 2 prompt tokens first, then c is admitted
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq, b);
  EXPECT_EQ(p.chunks[1].seq, c);
  EXPECT_FALSE(toy.kv->contains(a->id));
}

// A pool of 4 blocks of 2: two sequences of 3 tokens grow until the pool is full; the later admission is
// preempted (blocks freed: computed count 0), resumes at the front of waiting, and, without a prefix
// cache, is recomputed whole; with one, it takes its full blocks back (here the identical blocks of the
// other sequence, which hold the same tokens) and computes only the rest.
void preempt_the_latest_admission(bool prefix_caching) {
  Toy toy(2, 4, {.max_batch_tokens = 16, .max_seqs = 4}, prefix_caching);
  SequenceState* a = toy.add(3);
  SequenceState* b = toy.add(3);
  toy.step();  // both prefilled: 2 blocks each, 4 tokens each after sampling
  EXPECT_EQ(toy.kv->group(0).pool().num_free_blocks(), 0u);
  SchedulePlan p = toy.step();  // a's 4th token fits its second block; b's too
  p = toy.step();               // the 5th tokens need a third block each: b is preempted for a
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  EXPECT_EQ(b->num_preemptions, 1u);
  EXPECT_EQ(toy.scheduler->num_computed(*b), 0u);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(toy.scheduler->waiting().front(), b);
  toy.scheduler->remove(a);
  p = toy.step();  // b comes back
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, b);
  EXPECT_EQ(p.chunks[0].first, prefix_caching ? 4u : 0u);
  EXPECT_EQ(p.chunks[0].num_tokens, prefix_caching ? 1u : 5u);
}

TEST(Scheduler, PreemptsTheLatestAdmissionAndRecomputesIt) { preempt_the_latest_admission(false); }
TEST(Scheduler, APreemptedSequenceResumesFromTheCache) { preempt_the_latest_admission(true); }

// A waiting sequence whose prompt is cached is admitted with only its uncached tokens counted against
// the budget, and the cached blocks it takes are not counted as free for its new ones.
TEST(Scheduler, AdmissionCountsOnlyUncachedTokens) {
  Toy toy(4, 8, {.max_batch_tokens = 16, .max_seqs = 4});
  SequenceState* a = toy.add(13);
  toy.step();
  toy.scheduler->remove(a);  // blocks 0 1 2 cached (12 tokens), 3 partial (token 13)
  SequenceState* b = toy.add(13);
  SchedulePlan p = toy.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, b);
  EXPECT_EQ(p.chunks[0].first, 12u) << "all but the last prompt token";
  EXPECT_EQ(p.chunks[0].num_tokens, 1u);
  EXPECT_EQ(b->num_cached_tokens, 12u);
  EXPECT_TRUE(toy.last_copies.empty()) << "block 3 starts at the 13th token: nothing to copy";
  // A longer prompt that shares 14 tokens: 12 in whole blocks, 2 copied from the partial block of b.
  toy.step();
  toy.scheduler->remove(b);  // b computed 13 tokens, then 7: block 3 holds tokens 13 and 7
  SequenceState* c = toy.add(13);
  c->tokens.push_back(7);
  c->tokens.push_back(9);
  p = toy.step();
  EXPECT_EQ(p.chunks[0].first, 14u);
  ASSERT_EQ(toy.last_copies.size(), 1u);
  EXPECT_EQ(toy.last_copies[0].num_slots, 2u);
}

TEST(Scheduler, ASequenceThatCannotGrowAloneIsOutOfMemory) {
  Toy toy(2, 2, {.max_batch_tokens = 16, .max_seqs = 4});
  SequenceState* a = toy.add(3);
  toy.step();                   // 3 prompt tokens computed, a 4th sampled
  toy.step();                   // the 4th computed: the whole pool holds it; a 5th sampled
  SchedulePlan p = toy.step();  // the 5th needs a third block, and nobody else can give one up
  ASSERT_EQ(p.out_of_memory.size(), 1u);
  EXPECT_EQ(p.out_of_memory[0], a);
  EXPECT_TRUE(p.chunks.empty());
}

TEST(Scheduler, ForgettingComputedTokensRecomputesTheWholeHistory) {
  Toy toy(4, 16, {.max_batch_tokens = 64, .max_seqs = 4});
  SequenceState* a = toy.add(5);
  toy.step();
  toy.scheduler->forget_computed(a);  // the no-cache baseline after every token
  EXPECT_EQ(toy.scheduler->num_computed(*a), 0u);
  SchedulePlan p = toy.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 0u);
  EXPECT_EQ(p.chunks[0].num_tokens, 6u);
}

}  // namespace
}  // namespace kvs
