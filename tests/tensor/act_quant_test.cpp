// Activation conversion: known values, and every ISA gives the same bits as the scalar version.
#include "tensor/act_quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"

namespace kvs {
namespace {

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-3.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = u(rng) * std::pow(10.0f, e(rng));
  return x;
}

TEST(QuantizeActivationsTest, KnownBlockRoundsHalfToEven) {
  // amax = 127 -> d = 1: q = x rounded half to even (unlike the Q8_0 weight codec's half away from zero).
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 2.5f, -2.5f, 0.5f, 1.5f, -126.6f, 3.49f};
  const int8_t want[] = {127, 2, -2, 0, 2, -127, 3};
  std::copy(std::begin(in), std::end(in), x.begin());
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    QuantizedActivations q;
    quantize_activations(x, 1, 32, q, pool, isa);
    EXPECT_EQ(q.token_scales(0)[0], 1.0f);
    for (size_t j = 0; j < std::size(want); ++j) EXPECT_EQ(q.token_qs(0)[j], want[j]) << isa_name(isa) << " " << j;
  }
}

TEST(QuantizeActivationsTest, ZeroBlockHasZeroScaleAndValues) {
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    QuantizedActivations q;
    quantize_activations(std::vector<float>(64, 0.0f), 1, 64, q, pool, isa);
    for (size_t j = 0; j < 64; ++j) EXPECT_EQ(q.token_qs(0)[j], 0);
    EXPECT_EQ(q.token_scales(0)[1], 0.0f);
  }
}

TEST(QuantizeActivationsTest, EveryIsaGivesTheScalarBits) {
  std::mt19937 rng(3);
  ThreadPool pool(1);
  const size_t n = 5, cols = 4096 + 32;
  const std::vector<float> x = random_values(n * cols, rng);
  QuantizedActivations ref;
  quantize_activations(x, n, cols, ref, pool, Isa::kScalar);
  for (size_t t = 0; t < n; ++t)  // |x - d q| <= d / 2
    for (size_t c = 0; c < cols; ++c) {
      const float d = ref.token_scales(t)[c / 32];
      ASSERT_LE(std::fabs(x[t * cols + c] - d * ref.token_qs(t)[c]), d * 0.5001f);
    }
  for (Isa isa : supported_isas()) {
    QuantizedActivations q;
    quantize_activations(x, n, cols, q, pool, isa);
    ASSERT_EQ(q.n_tokens, n);
    ASSERT_EQ(q.cols, cols);
    for (size_t i = 0; i < n * cols; ++i) ASSERT_EQ(q.qs[i], ref.qs[i]) << isa_name(isa) << " value " << i;
    for (size_t i = 0; i < n * cols / 32; ++i) ASSERT_EQ(q.scales[i], ref.scales[i]) << isa_name(isa);
  }
}

TEST(QuantizeActivationsTest, GroupSumsAndOffsetsAreTheSumsOfTheirValues) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const size_t n = 70, cols = 2048 + 32;  // enough values to split over the pool
  const std::vector<float> x = random_values(n * cols, rng);
  for (Isa isa : supported_isas()) {
    QuantizedActivations q;
    quantize_activations(x, n, cols, q, pool, isa);
    for (size_t t = 0; t < n; ++t)
      for (size_t g = 0; g < cols / 16; ++g) {
        int sum = 0;
        for (size_t l = 0; l < 16; ++l) sum += q.token_qs(t)[16 * g + l];
        ASSERT_EQ(q.token_group_sums(t)[g], sum) << isa_name(isa) << " token " << t << " group " << g;
        if (g % 2 == 1) {
          ASSERT_EQ(q.token_offsets(t)[g / 2], -128 * (sum + q.token_group_sums(t)[g - 1])) << isa_name(isa);
        }
      }
  }
}

TEST(ConvertActivationsBf16Test, EveryIsaGivesTheScalarBitsIncludingSpecials) {
  std::mt19937 rng(4);
  ThreadPool pool(1);
  for (size_t cols : {1, 7, 16, 33, 1000}) {
    const size_t n = 3;
    std::vector<float> x = random_values(n * cols, rng);
    const float specials[] = {std::numeric_limits<float>::infinity(),
                              -0.0f,
                              std::numeric_limits<float>::quiet_NaN(),
                              std::bit_cast<float>(0x7f800001u),
                              std::bit_cast<float>(0x7f7fffffu),
                              std::bit_cast<float>(0x00008000u),
                              1.0f + 0x1p-8f,
                              1.0f + 3 * 0x1p-8f};
    for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];
    for (Isa isa : supported_isas()) {
      Bf16Activations b;
      convert_activations_bf16(x, n, cols, b, pool, isa);
      for (size_t i = 0; i < n * cols; ++i)
        ASSERT_EQ(b.values[i], fp32_to_bf16(x[i])) << isa_name(isa) << " cols " << cols << " value " << i;
    }
  }
}

TEST(QuantizeActivationsTest, ReshapeKeepsLargerBuffers) {
  QuantizedActivations q;
  q.reshape(4, 128);
  const int8_t* before = q.qs.data();
  q.reshape(1, 64);
  EXPECT_EQ(q.qs.data(), before);
  EXPECT_EQ(q.blocks_per_token(), 2u);
}

}  // namespace
}  // namespace kvs
