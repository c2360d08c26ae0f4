// The process's ISA limit: a lower limit makes the kernels behave as on a CPU without the higher levels.
#include "tensor/isa.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tensor/cpu_features.h"

namespace kvs {
namespace {

// Restores the limit the test binary started with (KVS_ISA), whatever the test does.
class IsaLimitTest : public ::testing::Test {
 protected:
  void TearDown() override { set_isa_limit(saved_); }
  Isa saved_ = isa_limit();
};

TEST_F(IsaLimitTest, LowerLimitHidesHigherLevels) {
  set_isa_limit(Isa::kScalar);
  EXPECT_EQ(best_isa(), Isa::kScalar);
  EXPECT_EQ(supported_isas(), std::vector<Isa>{Isa::kScalar});
  EXPECT_FALSE(isa_supported(Isa::kAvx2));
  EXPECT_FALSE(cpu_has_avx512_vnni());
  EXPECT_FALSE(cpu_has_avx512_bf16());
  set_isa_limit(Isa::kAvx2);
  EXPECT_EQ(best_isa(), cpu_supports_isa(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar);
  EXPECT_FALSE(isa_supported(Isa::kAvxVnni));
  EXPECT_FALSE(isa_supported(Isa::kAvx512));
  EXPECT_FALSE(cpu_has_avx512_vnni());
  set_isa_limit(Isa::kAvxVnni);
  EXPECT_EQ(isa_supported(Isa::kAvxVnni), cpu_supports_isa(Isa::kAvxVnni));
  EXPECT_FALSE(isa_supported(Isa::kAvx512));
}

// A CPU may have AVX-512 without AVX-VNNI (Zen 4): the best level is then avx512, and avxvnni is skipped.
TEST_F(IsaLimitTest, AvxVnniImpliesAvx2) {
  if (cpu_supports_isa(Isa::kAvxVnni)) {
    EXPECT_TRUE(cpu_supports_isa(Isa::kAvx2));
  }
  set_isa_limit(Isa::kAvx512);
  const std::vector<Isa> levels = supported_isas();
  EXPECT_EQ(std::count(levels.begin(), levels.end(), Isa::kAvxVnni), cpu_supports_isa(Isa::kAvxVnni) ? 1 : 0);
}

TEST_F(IsaLimitTest, LimitAboveTheCpuChangesNothing) {
  set_isa_limit(Isa::kAvx512);
  const Isa cpu_best = cpu_supports_isa(Isa::kAvx512)    ? Isa::kAvx512
                       : cpu_supports_isa(Isa::kAvxVnni) ? Isa::kAvxVnni
                       : cpu_supports_isa(Isa::kAvx2)    ? Isa::kAvx2
                                                         : Isa::kScalar;
  EXPECT_EQ(best_isa(), cpu_best);
  for (Isa isa : supported_isas()) EXPECT_TRUE(cpu_supports_isa(isa)) << isa_name(isa);
}

TEST(IsaNames, RoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512}) EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  EXPECT_FALSE(isa_from_name("avx1024"));
  EXPECT_FALSE(isa_from_name(""));
}

}  // namespace
}  // namespace kvs
