// Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS (tensor/legacy_iq4_quant.h):
// - dequantization equals, bit for bit, a reference written from ggml's block layouts byte by byte (field offsets, bit
// positions
//   and the IQ4 grid spelled out here, not taken from the code under test), on blocks of random bytes;
// - quantization round trips within the bound of its rounding: half a step of the affine types (Q4_1, Q5_1) plus
//   what storing d and m in fp16 moves (2^-11 relative, times the largest level); Q5_0's step, as its clamp may
//   put the extreme of the other sign one level off; the IQ4 types' RMS error no larger than Q4_0's on the same
//   normal values (their grid is made for such weights);
// - the fields read for the packer write back the same bytes, and the integer form of every block (the reference
//   matmul's) gives the reference's values exactly.
#include "tensor/legacy_iq4_quant.h"

#include <gtest/gtest.h>

#include <bit>
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
    // Bit for bit, the sign of a zero included (ggml's dequantization gives -0 where d < 0 and the level is 0).
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << "value " << i << ": " << got[i] << " vs " << want[i];
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

TEST(LegacyIq4Quant, FieldsWriteBackTheSameBytesAndIntegersGiveTheValues) {
  std::mt19937 rng(14);
  std::uniform_int_distribution<int> byte(0, 255);
  for (DType type : kTypes) {
    SCOPED_TRACE(dtype_name(type));
    const size_t n = 512;
    std::vector<std::byte> bytes(dtype_row_bytes(type, n)), copy(bytes.size());
    for (std::byte& b : bytes) b = static_cast<std::byte>(byte(rng));
    for (size_t i = 0; i < bytes.size(); i += dtype_block_bytes(type)) bytes[i + 1] &= std::byte{0x3b};  // finite d
    if (type == DType::kQ4_1 || type == DType::kQ5_1)                                                    // finite m
      for (size_t i = 0; i < bytes.size(); i += dtype_block_bytes(type)) bytes[i + 3] &= std::byte{0x3b};
    if (type == DType::kIQ4_XS) {
      for (size_t i = 0; i < n / 256; ++i)
        write_iq4_xs_levels(read_iq4_xs_levels(bytes.data() + 136 * i), copy.data() + 136 * i);
    } else {
      for (size_t b = 0; b < n / 32; ++b)
        write_block_levels32(type, read_block_levels32(type, bytes.data(), b), copy.data(), b);
    }
    ASSERT_EQ(std::memcmp(bytes.data(), copy.data(), bytes.size()), 0);
    std::vector<float> want(dtype_block_elements(type));
    for (size_t b = 0; b < n / 32; ++b) {
      const size_t block = b * 32 / want.size(), first = b * 32 % want.size();
      reference_block(type, reinterpret_cast<const uint8_t*>(bytes.data()) + block * dtype_block_bytes(type),
                      want.data());
      const BlockInts32 x = block_ints32(type, bytes.data(), b);
      for (size_t j = 0; j < 32; ++j)
        ASSERT_EQ(x.d * static_cast<float>(x.q[j]) + x.m, want[first + j]) << "block " << b << " value " << j;
    }
  }
}

}  // namespace
}  // namespace kvs
