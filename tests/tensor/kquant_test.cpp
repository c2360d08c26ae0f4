// K-quant blocks: dequantization bit for bit against the format definition written out a second way here
// (ggml's loops over the packed bytes, with the kmask tricks for the 6-bit scales), on random bytes and on hand-built
// corner cases (scales and mins of 0 and 63, the high bits of the packed scales, every hmask bit); quantization
// within the error its grid allows; and matrices of K-quants through dequantize/quantize agreeing with the kernels.
#include "tensor/kquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

// ---- the format definition, ggml's way ----

// Q4_K/Q5_K scales with the 32-bit masks: bytes 0-7 the scales, 8-15 the mins.
void scales_by_masks(const uint8_t* packed, uint8_t out[16]) {
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
  const uint32_t mins_low = u[1] & kLow6;
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  u[2] = mins_low;
  u[0] &= kLow6;
  std::memcpy(out, u, 16);
}

std::vector<float> reference_q4_q5(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, uint16_t d16,
                                   uint16_t dmin16) {
  uint8_t sm[16];
  scales_by_masks(scales, sm);
  const float d = fp16_to_fp32(d16), dmin = fp16_to_fp32(dmin16);
  std::vector<float> y;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, qs += 32, u1 <<= 2, u2 <<= 2) {
    const float d1 = d * sm[is], m1 = dmin * sm[8 + is], d2 = d * sm[is + 1], m2 = dmin * sm[8 + is + 1];
    for (int l = 0; l < 32; ++l) y.push_back(d1 * ((qs[l] & 0xf) + (qh && (qh[l] & u1) ? 16 : 0)) - m1);
    for (int l = 0; l < 32; ++l) y.push_back(d2 * ((qs[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2);
  }
  return y;
}

std::vector<float> reference_q6_k(const BlockQ6_K& x) {
  std::vector<float> y(256);
  const float d = fp16_to_fp32(x.d);
  const uint8_t *ql = x.ql, *qh = x.qh;
  const int8_t* sc = x.scales;
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      y[n + l] = d * sc[is] * static_cast<int8_t>(((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[n + l + 32] = d * sc[is + 2] * static_cast<int8_t>(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[n + l + 64] = d * sc[is + 4] * static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[n + l + 96] = d * sc[is + 6] * static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  return y;
}

std::vector<float> reference_q3_k(const BlockQ3_K& x) {
  uint32_t aux[4];
  std::memcpy(aux, x.scales, 12);
  constexpr uint32_t kLow2 = 0x03030303, kLow4 = 0x0f0f0f0f;
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kLow4) | (((tmp >> 4) & kLow2) << 4);
  aux[3] = ((aux[1] >> 4) & kLow4) | (((tmp >> 6) & kLow2) << 4);
  aux[0] = (aux[0] & kLow4) | (((tmp >> 0) & kLow2) << 4);
  aux[1] = (aux[1] & kLow4) | (((tmp >> 2) & kLow2) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const float d_all = fp16_to_fp32(x.d);
  std::vector<float> y;
  const uint8_t* q = x.qs;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * (scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          y.push_back(dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((x.hmask[l] & m) ? 0 : 4)));
      }
    }
  }
  return y;
}

std::vector<float> reference_q2_k(const BlockQ2_K& x) {
  const float d = fp16_to_fp32(x.d), dmin = fp16_to_fp32(x.dmin);
  std::vector<float> y;
  const uint8_t* q = x.qs;
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = x.scales[is++];
        const float dl = d * (sc & 0xf), ml = dmin * (sc >> 4);
        for (int l = 16 * half; l < 16 * half + 16; ++l) y.push_back(dl * ((q[l] >> shift) & 3) - ml);
      }
    }
  }
  return y;
}

std::vector<float> reference(DType type, const std::vector<uint8_t>& b) {
  switch (type) {
    case DType::kQ4_K: {
      BlockQ4_K x;
      std::memcpy(&x, b.data(), sizeof x);
      return reference_q4_q5(x.scales, x.qs, nullptr, x.d, x.dmin);
    }
    case DType::kQ5_K: {
      BlockQ5_K x;
      std::memcpy(&x, b.data(), sizeof x);
      return reference_q4_q5(x.scales, x.qs, x.qh, x.d, x.dmin);
    }
    case DType::kQ6_K: {
      BlockQ6_K x;
      std::memcpy(&x, b.data(), sizeof x);
      return reference_q6_k(x);
    }
    case DType::kQ3_K: {
      BlockQ3_K x;
      std::memcpy(&x, b.data(), sizeof x);
      return reference_q3_k(x);
    }
    default: {
      BlockQ2_K x;
      std::memcpy(&x, b.data(), sizeof x);
      return reference_q2_k(x);
    }
  }
}

// Where the fp16 super-block scales sit in each layout.
size_t d_offset(DType type) {
  switch (type) {
    case DType::kQ6_K: return offsetof(BlockQ6_K, d);
    case DType::kQ3_K: return offsetof(BlockQ3_K, d);
    case DType::kQ2_K: return offsetof(BlockQ2_K, d);
    default: return 0;
  }
}

void set_fp16(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(b.data() + at, &h, 2);
}

const DType kTypes[] = {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

void expect_decodes_as_reference(DType type, const std::vector<uint8_t>& block, const std::string& what) {
  const std::vector<float> want = reference(type, block);
  std::vector<float> got(256);
  dequantize_row(type, reinterpret_cast<const std::byte*>(block.data()), got.data(), 256);
  ASSERT_EQ(want.size(), 256u);
  for (size_t i = 0; i < 256; ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << what << " value " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(KQuantLayout, BlockSizesAreGgmls) {
  EXPECT_EQ(dtype_block_bytes(DType::kQ2_K), 84u);
  EXPECT_EQ(dtype_block_bytes(DType::kQ3_K), 110u);
  EXPECT_EQ(dtype_block_bytes(DType::kQ4_K), 144u);
  EXPECT_EQ(dtype_block_bytes(DType::kQ5_K), 176u);
  EXPECT_EQ(dtype_block_bytes(DType::kQ6_K), 210u);
  for (DType t : kTypes) {
    EXPECT_EQ(dtype_block_elements(t), 256u);
    EXPECT_EQ(dtype_from_ggml_id(static_cast<uint32_t>(t)), t);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::kQ4_K);
  EXPECT_EQ(ggml_type_name(3), "q4_1");
  EXPECT_EQ(ggml_type_name(20), "iq4_nl");
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_K, 4096), 16u * 144u);
}

// Random bytes everywhere (every scale, min, high bit), with finite super-block scales.
TEST(KQuantDequantize, RandomBlocksEqualTheFormatDefinition) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (DType type : kTypes) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<uint8_t> b(dtype_block_bytes(type));
      for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
      set_fp16(b, d_offset(type), scale(rng));
      if (type != DType::kQ6_K && type != DType::kQ3_K) set_fp16(b, d_offset(type) + 2, scale(rng));
      expect_decodes_as_reference(type, b, std::string(dtype_name(type)) + " trial " + std::to_string(trial));
    }
  }
}

// Hand-built Q4_K: sub-block j has scale j + 1 (j < 4) or 60 + j (j >= 4, which needs the packed high bits) and
// min 63 - j; d = 0.5, dmin = 0.25; value l of sub-block j is nibble (l + j) % 16. Values written by hand below.
TEST(KQuantDequantize, HandBuiltQ4KCornerCases) {
  std::vector<uint8_t> b(144, 0);
  set_fp16(b, 0, 0.5f);
  set_fp16(b, 2, 0.25f);
  uint8_t* scales = b.data() + 4;
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = j < 4 ? j + 1 : 60 + j - 4;  // 60..63: high bits 11
    m[j] = 63 - j;
  }
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  uint8_t* qs = b.data() + 16;
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 32; ++l) {
      const int q = (l + j) % 16;
      qs[32 * (j / 2) + l] = static_cast<uint8_t>(qs[32 * (j / 2) + l] | (j % 2 ? q << 4 : q));
    }
  std::vector<float> got(256);
  dequantize_row(DType::kQ4_K, reinterpret_cast<const std::byte*>(b.data()), got.data(), 256);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 32; ++l) {
      const float want = 0.5f * static_cast<float>(sc[j]) * static_cast<float>((l + j) % 16) - 0.25f * m[j];
      ASSERT_EQ(got[32 * j + l], want) << "sub-block " << j << " value " << l;
    }
  expect_decodes_as_reference(DType::kQ4_K, b, "hand-built q4_k");
  // All-zero scales and mins: every value is 0 whatever the nibbles.
  std::fill(scales, scales + 12, 0);
  dequantize_row(DType::kQ4_K, reinterpret_cast<const std::byte*>(b.data()), got.data(), 256);
  for (float v : got) ASSERT_EQ(v, 0.0f);
}

// Hand-built Q3_K: group g has scale raw g * 4 + 3 (0..63: every high-bit pattern), minus 32; value i has low bits
// i % 4 and its hmask bit set when i is even: q = i % 4 - (even ? 0 : 4).
TEST(KQuantDequantize, HandBuiltQ3KCornerCases) {
  std::vector<uint8_t> b(110, 0);
  set_fp16(b, offsetof(BlockQ3_K, d), 1.0f);
  uint8_t raw[16];
  for (int g = 0; g < 16; ++g) raw[g] = static_cast<uint8_t>(g * 4 + 3);
  uint8_t* s = b.data() + offsetof(BlockQ3_K, scales);
  for (int k = 0; k < 4; ++k) {
    s[k] = static_cast<uint8_t>((raw[k] & 15) | ((raw[8 + k] & 15) << 4));
    s[4 + k] = static_cast<uint8_t>((raw[4 + k] & 15) | ((raw[12 + k] & 15) << 4));
    s[8 + k] = static_cast<uint8_t>((raw[k] >> 4) | ((raw[4 + k] >> 4) << 2) | ((raw[8 + k] >> 4) << 4) |
                                    ((raw[12 + k] >> 4) << 6));
  }
  uint8_t check[16];
  unpack_q3_k_scales(s, check);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(check[g], raw[g]) << g;
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    b[offsetof(BlockQ3_K, qs) + 32 * h + l] |= static_cast<uint8_t>((i % 4) << (2 * j));
    if (i % 2 == 0) b[offsetof(BlockQ3_K, hmask) + l] |= static_cast<uint8_t>(1 << (4 * h + j));
  }
  std::vector<float> got(256);
  dequantize_row(DType::kQ3_K, reinterpret_cast<const std::byte*>(b.data()), got.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const float want = static_cast<float>(raw[i / 16] - 32) * static_cast<float>(i % 4 - (i % 2 == 0 ? 0 : 4));
    ASSERT_EQ(got[i], want) << i;
  }
  expect_decodes_as_reference(DType::kQ3_K, b, "hand-built q3_k");
}

// Hand-built Q6_K: value i is q = i % 64 - 32 (every 6-bit pattern), group g's scale is -128 + 17 g.
TEST(KQuantDequantize, HandBuiltQ6KCornerCases) {
  std::vector<uint8_t> b(210, 0);
  set_fp16(b, offsetof(BlockQ6_K, d), 0.125f);
  for (int g = 0; g < 16; ++g)
    b[offsetof(BlockQ6_K, scales) + g] = static_cast<uint8_t>(static_cast<int8_t>(-128 + 17 * g));
  for (int i = 0; i < 256; ++i) {
    const int v = i % 64, h = i / 128, k = (i % 128) / 32, l = i % 32;
    b[offsetof(BlockQ6_K, ql) + 64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((v & 15) << (k >= 2 ? 4 : 0));
    b[offsetof(BlockQ6_K, qh) + 32 * h + l] |= static_cast<uint8_t>((v >> 4) << (2 * k));
  }
  std::vector<float> got(256);
  dequantize_row(DType::kQ6_K, reinterpret_cast<const std::byte*>(b.data()), got.data(), 256);
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(got[i], 0.125f * static_cast<float>(-128 + 17 * (i / 16)) * static_cast<float>(i % 64 - 32)) << i;
  }
  expect_decodes_as_reference(DType::kQ6_K, b, "hand-built q6_k");
}

// Quantizing uniform rows: every value within half a grid step of its own sub-block (the grid's resolution), plus
// the rounding of the scales. Bound per type on [-1, 1): Q6_K 64 levels, Q5_K 32, Q4_K 16, Q3_K 8, Q2_K 4 over a
// range of 2: errors about range / levels / 2, measured RMS within a factor of the ideal uniform-quantizer RMS.
TEST(KQuantQuantize, ErrorMatchesTheGridResolution) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t n = 256 * 64;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = u(rng);
  const std::pair<DType, int> levels[] = {
      {DType::kQ6_K, 64}, {DType::kQ5_K, 32}, {DType::kQ4_K, 16}, {DType::kQ3_K, 8}, {DType::kQ2_K, 4}};
  double previous = 0.0;
  for (const auto& [type, count] : levels) {
    std::vector<std::byte> q(dtype_row_bytes(type, n));
    quantize_row(type, x.data(), q.data(), n);
    dequantize_row(type, q.data(), y.data(), n);
    double sq = 0.0;
    for (size_t i = 0; i < n; ++i) sq += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
    const double rms = std::sqrt(sq / n), ideal = 2.0 / count / std::sqrt(12.0);
    EXPECT_LT(rms, 1.3 * ideal) << dtype_name(type);
    EXPECT_GT(rms, previous) << dtype_name(type) << ": fewer bits must cost more";
    previous = rms;
  }
  // A row of zeros stays zeros.
  std::fill(x.begin(), x.end(), 0.0f);
  for (DType type : kTypes) {
    std::vector<std::byte> q(dtype_row_bytes(type, n));
    quantize_row(type, x.data(), q.data(), n);
    dequantize_row(type, q.data(), y.data(), n);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(type);
  }
}

}  // namespace
}  // namespace kvs
