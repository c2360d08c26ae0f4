// The swap-or-recompute choice of a preempted request (engine/preemption.h): the modes by name, the
// measured rates as weighted averages, and the cost comparison, derived from the rates given.
#include "engine/preemption.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

TEST(Preemption, ModesByName) {
  for (KvPreemptMode m : {KvPreemptMode::kAuto, KvPreemptMode::kSwap, KvPreemptMode::kRecompute})
    EXPECT_EQ(kv_preempt_mode_from_name(kv_preempt_mode_name(m)), m);
  EXPECT_EQ(kv_preempt_mode_from_name("sideways"), std::nullopt);
}

TEST(Preemption, RatesAreWeightedAveragesOfWhatWasObserved) {
  RateEstimate r;
  EXPECT_FALSE(r.known());
  r.observe(100.0, 0.0);  // no time: nothing learnt
  r.observe(0.0, 1.0);
  EXPECT_FALSE(r.known());
  r.observe(1000.0, 2.0);  // the first observation is the rate
  EXPECT_DOUBLE_EQ(r.per_second(), 500.0);
  r.observe(300.0, 1.0);  // then 0.8 old + 0.2 new
  EXPECT_DOUBLE_EQ(r.per_second(), 0.8 * 500.0 + 0.2 * 300.0);
}

TEST(Preemption, AutoSwapsWhenCopyingOutAndBackCostsLessThanRecomputing) {
  PreemptionCosts costs;
  costs.copy_bytes.observe(1e9, 1.0);                       // 1 GB/s
  costs.recompute_tokens.observe(1000, 1.0);                // 1,000 tokens/s
  EXPECT_DOUBLE_EQ(*costs.swap_seconds(500'000'000), 1.0);  // out and back
  EXPECT_DOUBLE_EQ(*costs.recompute_seconds(500), 0.5);
  // 64 tokens in 4 MB: 8 ms to swap, 64 ms to recompute.
  EXPECT_TRUE(prefer_swap(KvPreemptMode::kAuto, costs, 4'000'000, 64));
  // The same tokens in 40 MB (a huge model's blocks): 80 ms to swap.
  EXPECT_FALSE(prefer_swap(KvPreemptMode::kAuto, costs, 40'000'000, 64));
  // The forced modes ignore the costs.
  EXPECT_TRUE(prefer_swap(KvPreemptMode::kSwap, costs, 40'000'000, 64));
  EXPECT_FALSE(prefer_swap(KvPreemptMode::kRecompute, costs, 4'000'000, 64));
  // Nothing computed: nothing to keep.
  EXPECT_FALSE(prefer_swap(KvPreemptMode::kAuto, costs, 4'000'000, 0));
}

TEST(Preemption, AutoSwapsUntilBothRatesAreMeasured) {
  PreemptionCosts costs;
  EXPECT_EQ(costs.swap_seconds(1000), std::nullopt);
  EXPECT_TRUE(prefer_swap(KvPreemptMode::kAuto, costs, 40'000'000, 1));
  costs.recompute_tokens.observe(1e6, 1.0);
  EXPECT_TRUE(prefer_swap(KvPreemptMode::kAuto, costs, 40'000'000, 1)) << "the copy rate is not known yet";
  costs.copy_bytes.observe(1e9, 1.0);
  EXPECT_FALSE(prefer_swap(KvPreemptMode::kAuto, costs, 40'000'000, 1));
}

}  // namespace
}  // namespace kvs
