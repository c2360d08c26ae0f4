// Statistics and plan fitting of `kvserve bench` (nothing here is timed).
#include "bench/bench_stats.h"

#include <gtest/gtest.h>

#include <vector>

#include "bench/bench_plan.h"

namespace kvs {
namespace {

TEST(BenchStats, SummarizesMeanSampleStddevAndRange) {
  const std::vector<double> v = {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0};
  const Summary s = summarize(v);
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.stddev, 2.138089935, 1e-9);  // sqrt(32 / 7)
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_NEAR(s.relative_spread(), 2.138089935 / 5.0, 1e-9);
}

TEST(BenchStats, OneValueHasNoSpreadAndNoneIsAllZero) {
  const std::vector<double> one = {3.5};
  const Summary s = summarize(one);
  EXPECT_EQ(s.count, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 3.5);
  EXPECT_DOUBLE_EQ(s.stddev, 0.0);
  EXPECT_DOUBLE_EQ(s.min, 3.5);
  EXPECT_DOUBLE_EQ(s.max, 3.5);
  const Summary none = summarize({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_DOUBLE_EQ(none.mean, 0.0);
  EXPECT_DOUBLE_EQ(none.relative_spread(), 0.0);
}

TEST(BenchStats, MedianIgnoresAFewStalls) {
  const std::vector<double> odd = {0.024, 0.300, 0.023, 0.025, 0.024};
  EXPECT_DOUBLE_EQ(median(odd), 0.024);
  const std::vector<double> even = {4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(median(even), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
}

TEST(BenchPlan, StandardAndQuickPlansValidate) {
  EXPECT_TRUE(BenchPlan::standard().validate().is_ok());
  EXPECT_TRUE(BenchPlan::quick().validate().is_ok());
  BenchPlan p;
  p.reps = 0;
  const Status s = p.validate();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("0"), std::string::npos) << s.message();
  p = BenchPlan::standard();
  p.paging.min_tokens = 4000;
  EXPECT_NE(p.validate().message().find("4000"), std::string::npos) << p.validate().message();
}

TEST(BenchPlan, AContextThatHoldsEverythingChangesNothing) {
  const FittedPlan f = fit_plan_to_context(BenchPlan::standard(), 4096);
  EXPECT_TRUE(f.notes.empty());
  EXPECT_EQ(f.plan.decode_depths, (std::vector<size_t>{0, 512, 2048}));
  EXPECT_EQ(f.plan.prefill_tokens, (std::vector<size_t>{128, 512}));
  EXPECT_EQ(f.plan.cache_contexts, (std::vector<size_t>{16, 64, 256, 1024}));
  EXPECT_EQ(f.plan.paging.max_tokens, 2048u);
}

TEST(BenchPlan, ASmallContextLowersDepthsAndDropsDuplicates) {
  const FittedPlan f = fit_plan_to_context(BenchPlan::standard(), 512);
  EXPECT_EQ(f.plan.decode_tokens, 128u);
  // 512 and 2048 both become 512 - 128 - 1: the engine computes at most context - 1 positions.
  EXPECT_EQ(f.plan.decode_depths, (std::vector<size_t>{0, 383}));
  EXPECT_EQ(f.plan.prefill_tokens, (std::vector<size_t>{128, 512}));
  EXPECT_EQ(f.plan.cache_contexts, (std::vector<size_t>{16, 64, 256, 479}));  // room for the 32 cached steps
  EXPECT_EQ(f.plan.paging.max_tokens, 512u);
  EXPECT_FALSE(f.notes.empty());
  EXPECT_TRUE(f.plan.validate().is_ok());
}

TEST(BenchPlan, ATinyContextShortensTheDecodeRun) {
  const FittedPlan f = fit_plan_to_context(BenchPlan::standard(), 100);
  EXPECT_EQ(f.plan.decode_tokens, 50u);
  EXPECT_EQ(f.plan.decode_depths, (std::vector<size_t>{0, 49}));
  EXPECT_EQ(f.plan.prefill_tokens, (std::vector<size_t>{100}));
  EXPECT_EQ(f.plan.cache_contexts, (std::vector<size_t>{16, 64, 67}));
  EXPECT_TRUE(f.plan.validate().is_ok());
}

}  // namespace
}  // namespace kvs
