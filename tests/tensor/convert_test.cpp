// Reference codecs: Q8_0 / Q4_0 blocks follow llama.cpp's quantize_row_q8_0_ref / q4_0_ref exactly, and
// the fp16 / bf16 conversions of core/half.h round to nearest even with subnormals, inf and nan.
#include "tensor/convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/half.h"

namespace kvs {
namespace {

std::vector<std::byte> quantize(DType type, const std::vector<float>& x) {
  std::vector<std::byte> out(dtype_row_bytes(type, x.size()));
  quantize_row(type, x.data(), out.data(), x.size());
  return out;
}

TEST(ConvertQ8_0Test, ScaleIsMaxAbsOver127AndRoundingIsHalfAwayFromZero) {
  // amax = 127 -> d = 1 exactly, so q = roundf(x): ties go away from zero as in ggml's roundf.
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -126.4f, 3.49f};
  const int8_t want[] = {127, 3, -3, 1, -1, 2, -126, 3};
  std::copy(std::begin(in), std::end(in), x.begin());
  const auto bytes = quantize(DType::kQ8_0, x);
  BlockQ8_0 block;
  std::memcpy(&block, bytes.data(), sizeof block);
  EXPECT_EQ(block.d, 0x3c00);  // fp16 1.0
  for (size_t j = 0; j < std::size(want); ++j) EXPECT_EQ(block.qs[j], want[j]) << j;
  for (size_t j = std::size(want); j < 32; ++j) EXPECT_EQ(block.qs[j], 0) << j;
}

TEST(ConvertQ8_0Test, KnownBlockWithInexactScale) {
  // x_j = (j - 16) / 4: amax = 4, d = 4/127 (fp16 0x2808 = 0.031494...), q_j = round((j - 16) * 7.9375)
  // computed with the fp32 inverse scale 31.75.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;
  const auto bytes = quantize(DType::kQ8_0, x);
  BlockQ8_0 block;
  std::memcpy(&block, bytes.data(), sizeof block);
  EXPECT_EQ(block.d, 0x2808);
  const int8_t want[32] = {-127, -119, -111, -103, -95, -87, -79, -71, -64, -56, -48, -40, -32, -24, -16, -8,
                           0,    8,    16,   24,   32,  40,  48,  56,  64,  71,  79,  87,  95,  103, 111, 119};
  for (int j = 0; j < 32; ++j) EXPECT_EQ(block.qs[j], want[j]) << j;
  // Dequantized with the fp16 scale.
  std::vector<float> back(32);
  dequantize_row(DType::kQ8_0, bytes.data(), back.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], fp16_to_fp32(0x2808) * want[j]) << j;
}

TEST(ConvertQ8_0Test, ZeroBlockHasZeroScale) {
  const auto bytes = quantize(DType::kQ8_0, std::vector<float>(64, 0.0f));
  std::vector<float> back(64, 1.0f);
  dequantize_row(DType::kQ8_0, bytes.data(), back.data(), 64);
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

TEST(ConvertQ4_0Test, ScaleIsSignedMaxOverMinus8AndNibblesTruncateXPlus8Point5) {
  // The value of largest magnitude is -8, so d = 1: nibble = min(15, trunc(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  const float in[] = {-8.0f, 7.0f, 7.4f, -0.5f, 0.49f, 0.5f, -3.2f, 6.6f};
  const uint8_t want[] = {0, 15, 15, 8, 8, 9, 5, 15};
  std::copy(std::begin(in), std::end(in), x.begin());
  x[16] = -7.0f;  // high nibble of byte 0
  x[17] = 2.0f;   // high nibble of byte 1
  const auto bytes = quantize(DType::kQ4_0, x);
  BlockQ4_0 block;
  std::memcpy(&block, bytes.data(), sizeof block);
  EXPECT_EQ(block.d, 0x3c00);
  for (size_t j = 0; j < std::size(want); ++j) EXPECT_EQ(block.qs[j] & 0x0f, want[j]) << j;
  EXPECT_EQ(block.qs[0] >> 4, 1);
  EXPECT_EQ(block.qs[1] >> 4, 10);
  EXPECT_EQ(block.qs[2] >> 4, 8);  // zeros sit on nibble 8
  std::vector<float> back(32);
  dequantize_row(DType::kQ4_0, bytes.data(), back.data(), 32);
  EXPECT_EQ(back[0], -8.0f);
  EXPECT_EQ(back[1], 7.0f);
  EXPECT_EQ(back[5], 1.0f);
  EXPECT_EQ(back[16], -7.0f);
  EXPECT_EQ(back[17], 2.0f);
}

TEST(ConvertQ4_0Test, PositiveExtremeGivesNegativeScaleAndClipsTheOtherEnd) {
  // max = +8 -> d = -1: x = 8 maps to nibble 0 (value 8), x = -8 would need nibble 16 and clips to 15 (-7).
  std::vector<float> x(32, 0.0f);
  x[0] = 8.0f;
  x[1] = -8.0f;
  x[2] = 1.0f;
  const auto bytes = quantize(DType::kQ4_0, x);
  BlockQ4_0 block;
  std::memcpy(&block, bytes.data(), sizeof block);
  EXPECT_EQ(block.d, 0xbc00);  // fp16 -1.0
  std::vector<float> back(32);
  dequantize_row(DType::kQ4_0, bytes.data(), back.data(), 32);
  EXPECT_EQ(back[0], 8.0f);
  EXPECT_EQ(back[1], -7.0f);
  EXPECT_EQ(back[2], 1.0f);
}

TEST(ConvertQuantTest, RoundTripErrorIsWithinOneStep) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * (1.0f + i % 7);
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const auto bytes = quantize(type, x);
    std::vector<float> back(x.size());
    dequantize_row(type, bytes.data(), back.data(), x.size());
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0.0f;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      // Q8_0: half a step of amax/127. Q4_0: its range is [-8d, 7d] with the extreme on the -8 side, so
      // values of the other sign beyond 7d clip: up to one step of amax/8. Plus the fp16 rounding of d.
      const float allowed = type == DType::kQ8_0 ? 0.5f * amax / 127.0f : amax / 8.0f;
      for (size_t j = 0; j < 32; ++j)
        EXPECT_NEAR(back[b * 32 + j], x[b * 32 + j], allowed + amax * 0x1p-10f) << dtype_name(type);
    }
  }
}

TEST(HalfTest, Fp16RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);             // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);  // below the tie with infinity
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // tie -> even = infinity
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
}

TEST(HalfTest, Fp16SubnormalsInfAndNan) {
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-24f), 0x0003);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(fp32_to_fp16(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(2.5f * 0x1p-24f), 0x0002);  // tie between subnormals -> even
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
}

TEST(HalfTest, EveryFp16ValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
    } else {
      EXPECT_EQ(fp32_to_fp16(f), h) << h;
    }
  }
}

TEST(HalfTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie -> even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00010000u)), 0x0001);  // subnormal, exact
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // subnormal tie -> even
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormal tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = fp32_to_bf16(std::bit_cast<float>(0x7f800001u));  // signalling nan stays nan
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
}

TEST(HalfTest, EveryBf16ValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_bf16(f), h) << h;
  }
}

TEST(ConvertTest, FloatRowsRoundTripThroughEveryType) {
  const std::vector<float> x = {0.0f, 1.0f, -2.5f, 0.15625f, 1024.0f, -0.0078125f, 3.0f};  // exact in all
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    const auto bytes = quantize(type, x);
    std::vector<float> back(x.size());
    dequantize_row(type, bytes.data(), back.data(), x.size());
    EXPECT_EQ(back, x) << dtype_name(type);
  }
}

}  // namespace
}  // namespace kvs
