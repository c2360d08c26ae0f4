// The paging memory simulation of `kvserve bench`: exact block counts on toy workloads.
#include "bench/bench_paging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace kvs {
namespace {

// 2 layers x 1 KV head x head_dim 4, f32: 2 x 2 x 4 x 4 = 64 bytes per token.
const KvCacheSpec kSpec{.num_layers = 2, .num_kv_heads = 1, .head_dim = 4};

TEST(BenchPaging, WorkloadLengthsAreFixedBySeedAndInRange) {
  const PagingWorkload w{.num_sequences = 64, .min_tokens = 32, .max_tokens = 2048, .seed = 7};
  const std::vector<size_t> a = paging_workload_lengths(w), b = paging_workload_lengths(w);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 64u);
  for (size_t n : a) {
    EXPECT_GE(n, 32u);
    EXPECT_LE(n, 2048u);
  }
  EXPECT_GT(*std::max_element(a.begin(), a.end()) - *std::min_element(a.begin(), a.end()), 1000u);  // mixed
  PagingWorkload other = w;
  other.seed = 8;
  EXPECT_NE(paging_workload_lengths(other), a);
}

TEST(BenchPaging, CountsBlocksWasteAndFitExactly) {
  // Slots of 64 tokens; budget = 2 slots = 128 tokens = 8 blocks of 16.
  const PagingWorkload w{.num_sequences = 4, .min_tokens = 1, .max_tokens = 64, .budget_slots = 2, .block_size = 16};
  const std::vector<size_t> lengths = {16, 17, 1, 64};  // blocks 1 + 2 + 1 + 4 = 8
  auto r = simulate_paging_memory(w, lengths, kSpec);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->tokens_held, 98u);
  EXPECT_EQ(r->paged_blocks, 8u);
  EXPECT_EQ(r->paged_bytes, 8u * 16 * 64);
  EXPECT_EQ(r->token_bytes, 98u * 64);
  EXPECT_EQ(r->contiguous_bytes, 4u * 64 * 64);
  EXPECT_NEAR(r->paged_waste_percent, 100.0 * (128 - 98) / 128, 1e-9);
  EXPECT_NEAR(r->contiguous_waste_percent, 100.0 * (256 - 98) / 256, 1e-9);
  EXPECT_EQ(r->budget_bytes, 2u * 64 * 64);
  EXPECT_EQ(r->contiguous_fit, 2u);
  EXPECT_EQ(r->paged_fit, 4u);  // all 8 blocks fit the 8-block budget
  EXPECT_DOUBLE_EQ(r->fit_ratio, 2.0);
}

TEST(BenchPaging, AdmissionStopsAtTheFirstSequenceThatDoesNotFit) {
  const PagingWorkload w{.num_sequences = 4, .min_tokens = 1, .max_tokens = 64, .budget_slots = 1, .block_size = 16};
  const std::vector<size_t> lengths = {32, 48, 1, 1};  // 2 blocks, then 3 > the 2 left of 4
  auto r = simulate_paging_memory(w, lengths, kSpec);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->paged_fit, 1u);
  EXPECT_EQ(r->contiguous_fit, 1u);
}

TEST(BenchPaging, FullBlocksAndFullSlotsWasteNothing) {
  const PagingWorkload w{.num_sequences = 2, .min_tokens = 1, .max_tokens = 32, .budget_slots = 2, .block_size = 16};
  const std::vector<size_t> lengths = {32, 32};
  auto r = simulate_paging_memory(w, lengths, kSpec);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_DOUBLE_EQ(r->paged_waste_percent, 0.0);
  EXPECT_DOUBLE_EQ(r->contiguous_waste_percent, 0.0);
  EXPECT_EQ(r->paged_fit, 2u);
}

TEST(BenchPaging, ALengthBeyondTheSlotIsRejectedWithTheNumbers) {
  const PagingWorkload w{.num_sequences = 1, .min_tokens = 1, .max_tokens = 64, .block_size = 16};
  const std::vector<size_t> lengths = {65};
  auto r = simulate_paging_memory(w, lengths, kSpec);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("65"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("64"), std::string::npos) << r.status().message();
}

TEST(BenchPaging, TheStandardWorkloadWastesLittleAndFitsAboutTwiceAsMany) {
  const PagingWorkload w = BenchPlan::standard().paging;
  auto r = simulate_paging_memory(w, paging_workload_lengths(w), kSpec);
  ASSERT_TRUE(r) << r.status().message();
  // At most block_size - 1 tokens per sequence are allocated but empty.
  EXPECT_LE(r->paged_blocks * w.block_size - r->tokens_held, w.num_sequences * (w.block_size - 1));
  EXPECT_LT(r->paged_waste_percent, 2.0);
  EXPECT_GT(r->contiguous_waste_percent, 30.0);
  EXPECT_GT(r->fit_ratio, 1.5);
}

}  // namespace
}  // namespace kvs
