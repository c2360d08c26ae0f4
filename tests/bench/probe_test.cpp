// The probes run and give plausible numbers (their values are checked by `kvserve bench`, not here).
#include "bench/probe.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvs {
namespace {

TEST(ProbeTest, MemoryBandwidthIsPositiveAndFinite) {
  ThreadPool pool(1);
  const double gbs = measure_memory_bandwidth_gbs(pool, size_t{16} << 20);
  EXPECT_TRUE(std::isfinite(gbs));
  EXPECT_GT(gbs, 0.1);
}

TEST(ProbeTest, PeakFlopsIsPositiveForEveryIsa) {
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    const double gflops = measure_peak_gflops(pool, isa);
    EXPECT_TRUE(std::isfinite(gflops)) << isa_name(isa);
    EXPECT_GT(gflops, 0.1) << isa_name(isa);
  }
}

TEST(ProbeTest, PeakInt8IsPositiveForEveryIsa) {
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    const double gops = measure_peak_int8_gops(pool, isa);
    EXPECT_TRUE(std::isfinite(gops)) << isa_name(isa);
    EXPECT_GT(gops, 0.1) << isa_name(isa);
  }
}

}  // namespace
}  // namespace kvs
