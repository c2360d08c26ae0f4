// Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS (tensor/legacy_iq4_quant.h):
// - dequantization equals a reference written from ggml's block layouts byte by byte (field offsets, bit positions
//   and the IQ4 grid spelled out here, not taken from the code under test), on blocks of random bytes;
// - quantization round trips within the bound of its rounding: half a step of the affine types (Q4_1, Q5_1) plus
//   what storing d and m in fp16 moves (2^-11 relative, times the largest level); Q5_0's step, as its clamp may
//   put the extreme of the other sign one level off; the IQ4 types' RMS error no larger than Q4_0's on the same
//   normal values (their grid is made for such weights);
// - Q5_0 and IQ4_NL transcode to Q8_0 blocks of exactly the same values (the packed path of a whole model:
//   tests/engine/legacy_iq4_model_test.cpp).
#include "tensor/legacy_iq4_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

constexpr int kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float half_at(const uint8_t* p) { return fp16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
// The 4-bit code of value j of 32 whose nibbles start at q: j < 16 low nibbles, j >= 16 high nibbles.
int code4(const uint8_t* q, size_t j) { return j < 16 ? q[j] & 15 : q[j - 16] >> 4; }

// ggml's layouts, by byte offset. One block of `type` at p into out (32 or 256 values).
void reference_block(DType type, const uint8_t* p, float* out) {
  switch (type) {
    case DType::kQ4_1:  // d @0, m @2, qs @4
      for (size_t j = 0; j < 32; ++j) out[j] = half_at(p) * static_cast<float>(code4(p + 4, j)) + half_at(p + 2);
      return;
    case DType::kQ5_0: {  // d @0, qh @2 (u32), qs @6
      const uint32_t qh = u32_at(p + 2);
      for (size_t j = 0; j < 32; ++j)
        out[j] = half_at(p) * static_cast<float>((code4(p + 6, j) | static_cast<int>(((qh >> j) & 1) << 4)) - 16);
      return;
    }
    case DType::kQ5_1: {  // d @0, m @2, qh @4, qs @8
      const uint32_t qh = u32_at(p + 4);
      for (size_t j = 0; j < 32; ++j)
        out[j] =
            half_at(p) * static_cast<float>(code4(p + 8, j) | static_cast<int>(((qh >> j) & 1) << 4)) + half_at(p + 2);
      return;
    }
    case DType::kIQ4_NL:  // d @0, qs @2
      for (size_t j = 0; j < 32; ++j) out[j] = half_at(p) * static_cast<float>(kGrid[code4(p + 2, j)]);
      return;
    case DType::kIQ4_XS: {  // d @0, scales_h @2 (u16), scales_l @4 (4 bytes), qs @8 (8 x 16 bytes)
      const unsigned scales_h = p[2] | (p[3] << 8);
      for (size_t s = 0; s < 8; ++s) {
        const int ls = ((p[4 + s / 2] >> (4 * (s % 2))) & 15) | static_cast<int>(((scales_h >> (2 * s)) & 3) << 4);
        const float dl = half_at(p) * static_cast<float>(ls - 32);
        for (size_t j = 0; j < 32; ++j) out[32 * s + j] = dl * static_cast<float>(kGrid[code4(p + 8 + 16 * s, j)]);
      }
      return;
    }
    default: FAIL() << "no reference for " << dtype_name(type);
  }
}

constexpr DType kTypes[] = {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kIQ4_XS};

TEST(LegacyIq4Quant, DequantizationEqualsTheLayoutReadByteByByte) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (DType type : kTypes) {
    SCOPED_TRACE(dtype_name(type));
    const size_t blocks = 6, per = dtype_block_elements(type), bytes = dtype_block_bytes(type);
    std::vector<uint8_t> data(blocks * bytes);
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    for (size_t b = 0; b < blocks; ++b) {  // finite fp16 scales (and mins) at 0 and, for the affine types, 2
      for (size_t at : {size_t{0}, size_t{2}}) {
        if (at == 2 && type != DType::kQ4_1 && type != DType::kQ5_1) continue;
        const uint16_t h = fp32_to_fp16(scale(rng));
        data[b * bytes + at] = static_cast<uint8_t>(h & 0xff);
        data[b * bytes + at + 1] = static_cast<uint8_t>(h >> 8);
      }
    }
    std::vector<float> got(blocks * per), want(blocks * per);
    dequantize_row(type, reinterpret_cast<const std::byte*>(data.data()), got.data(), got.size());
    for (size_t b = 0; b < blocks; ++b) reference_block(type, data.data() + b * bytes, want.data() + b * per);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "value " << i;
  }
}

std::vector<float> normal_values(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

std::vector<float> round_trip(DType type, const std::vector<float>& x) {
  std::vector<std::byte> bytes(dtype_row_bytes(type, x.size()));
  quantize_row(type, x.data(), bytes.data(), x.size());
  std::vector<float> y(x.size());
  dequantize_row(type, bytes.data(), y.data(), y.size());
  return y;
}

TEST(LegacyIq4Quant, AffineAndFiveBitTypesRoundTripWithinHalfAStep) {
  std::mt19937 rng(12);
  const std::vector<float> x = normal_values(32 * 64, rng);
  for (DType type : {DType::kQ4_1, DType::kQ5_1, DType::kQ5_0}) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<float> y = round_trip(type, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float lo = x[32 * b], hi = lo, amax = 0.0f;
      for (size_t j = 0; j < 32; ++j) {
        lo = std::min(lo, x[32 * b + j]);
        hi = std::max(hi, x[32 * b + j]);
        amax = std::max(amax, std::fabs(x[32 * b + j]));
      }
      const float fp16 = 0x1.0p-11f;
      float bound = 0.0f;
      if (type == DType::kQ5_0) {
        const float d = amax / 16.0f;
        bound = d + 16.0f * d * fp16;
      } else {
        const float top = type == DType::kQ4_1 ? 15.0f : 31.0f, d = (hi - lo) / top;
        bound = d / 2 + top * d * fp16 + std::fabs(lo) * fp16;
      }
      for (size_t j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), bound * 1.0001f + 1e-7f) << "block " << b << " value " << j;
    }
  }
}

double rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
  return std::sqrt(sum / static_cast<double>(x.size()));
}

TEST(LegacyIq4Quant, Iq4TypesAreNoWorseThanQ4_0OnNormalWeights) {
  std::mt19937 rng(13);
  const std::vector<float> x = normal_values(256 * 32, rng);
  const double q4_0 = rms_error(x, round_trip(DType::kQ4_0, x));
  const double nl = rms_error(x, round_trip(DType::kIQ4_NL, x)), xs = rms_error(x, round_trip(DType::kIQ4_XS, x));
  EXPECT_LT(nl, q4_0) << "IQ4_NL " << nl << " vs Q4_0 " << q4_0;
  EXPECT_LT(xs, q4_0) << "IQ4_XS " << xs << " vs Q4_0 " << q4_0;
  EXPECT_LT(rms_error(x, round_trip(DType::kQ5_0, x)), nl) << "five bits beat four";
}

TEST(LegacyIq4Quant, Q5_0AndIq4NlTranscodeToQ8_0OfTheSameValues) {
  std::mt19937 rng(14);
  const std::vector<float> x = normal_values(32 * 40, rng);
  for (DType type : {DType::kQ5_0, DType::kIQ4_NL}) {
    SCOPED_TRACE(dtype_name(type));
    ASSERT_TRUE(transcodes_to_q8_0(type));
    std::vector<std::byte> bytes(dtype_row_bytes(type, x.size()));
    quantize_row(type, x.data(), bytes.data(), x.size());
    std::vector<BlockQ8_0> q8(x.size() / 32);
    transcode_row_to_q8_0(type, bytes.data(), q8.data(), x.size());
    std::vector<float> a(x.size()), b(x.size());
    dequantize_row(type, bytes.data(), a.data(), a.size());
    dequantize_row(DType::kQ8_0, reinterpret_cast<const std::byte*>(q8.data()), b.data(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "value " << i;
  }
  EXPECT_FALSE(transcodes_to_q8_0(DType::kQ4_1)) << "a min is no Q8_0 value";
}

}  // namespace
}  // namespace kvs
