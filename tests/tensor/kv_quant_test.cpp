// int8 / int4 K/V rows (tensor/kv_quant.h, layout core/kv_rows.h): the (scale, min) pair bounds its
// range, the int4 nibble layout, round trips within scale / 2 per token and per channel group (of the
// fp16 rows a group is quantized from; odd widths, every tail, outlier channels), the Hadamard
// transform, and every fused kernel against f32 attention over the dequantized block, on every isa
// this CPU runs.
#include "tensor/kv_quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "tensor/attention_ops.h"

namespace kvs {
namespace {

constexpr double kUnit = 1.0 / (1 << 24);  // fp32 unit roundoff

// A head-block of `rows` rows of `width` elements: data padded to 4 bytes, then the scales.
struct Block {
  KvDType type;
  KvScaleAxis axis;
  size_t width, rows, group;
  std::vector<uint8_t> bytes;

  Block(KvDType t, KvScaleAxis a, size_t w, size_t r)
      : type(t),
        axis(a),
        width(w),
        rows(r),
        group(a == KvScaleAxis::kPerChannel ? std::min<size_t>(r, 16) : (w % 32 ? w : 32)) {
    const size_t pairs = axis == KvScaleAxis::kPerChannel ? (rows + group - 1) / group * width : rows * width / group;
    bytes.assign(data_bytes() + pairs * 4, 0);
  }
  size_t row_bytes() const { return width * kv_dtype_bits(type) / 8; }
  size_t data_bytes() const { return (rows * row_bytes() + 3) / 4 * 4; }
  uint16_t* scales() { return reinterpret_cast<uint16_t*>(bytes.data() + data_bytes()); }
  KvRows view() { return {.data = bytes.data(), .type = type, .scales = scales(), .axis = axis, .group_size = group}; }
  // Rows [0, count) of x: per token one at a time; per channel each group (the last one, of fewer rows,
  // as it is) quantized from its rows in fp16.
  void write(const float* x, size_t count) {
    for (size_t first = 0; first < count; first += (axis == KvScaleAxis::kPerChannel ? group : 1)) {
      if (axis == KvScaleAxis::kPerToken) {
        quantize_row_per_token(type, x + first * width, width, group, bytes.data() + first * row_bytes(),
                               scales() + first * 2 * (width / group));
        continue;
      }
      const size_t n = std::min(group, count - first);
      std::vector<uint16_t> halves(n * width);
      for (size_t i = 0; i < n * width; ++i) halves[i] = fp32_to_fp16(x[first * width + i]);
      quantize_group_per_channel(type, halves.data(), n, width, bytes.data() + first * row_bytes(),
                                 scales() + first / group * 2 * width);
    }
  }
  float at(size_t s, size_t i) { return kv_element(view(), width, s, i); }
  // |min| + |scale q| of element (s, i): the size of the terms a kernel sums for it.
  double magnitude(size_t s, size_t i) {
    const bool per_channel = axis == KvScaleAxis::kPerChannel;
    const size_t set = per_channel ? width : width / group;
    const uint16_t* pairs = scales() + (per_channel ? s / group : s) * 2 * set;
    const float min = fp16_to_fp32(pairs[set + (per_channel ? i : i / group)]);
    return std::fabs(min) + std::fabs(at(s, i) - min);
  }
};

// Rows like real keys: unit noise, one outlier channel 20x larger, one channel offset by 5.
std::vector<float> key_like_rows(size_t rows, size_t width, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(rows * width);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < width; ++c) {
      float v = n(rng);
      if (c == 3 % width) v *= 20.0f;
      if (c == 5 % width) v += 5.0f;
      x[r * width + c] = v;
    }
  }
  return x;
}

TEST(KvQuant, PairsCoverTheirRange) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    const uint32_t levels = kv_quant_levels(type);
    for (int i = 0; i < 2000; ++i) {
      float lo = u(rng), hi = u(rng);
      if (i % 7 == 0) hi = lo;           // a point
      if (i % 11 == 0) hi = lo + 1e-4f;  // a tiny range
      if (lo > hi) std::swap(lo, hi);
      const KvQuantPair p = kv_quant_pair(lo, hi, levels);
      const float min = fp16_to_fp32(p.min), scale = fp16_to_fp32(p.scale);
      ASSERT_LE(min, lo);
      ASSERT_GE(min + scale * static_cast<float>(levels), hi) << lo << " " << hi;
      ASSERT_LE(kv_quantize(hi, p, levels), levels);
    }
  }
}

TEST(KvQuant, Int4PairsElementJWithJPlusHalfOfItsChunk) {
  for (size_t width : {2u, 8u, 40u, 64u}) {
    std::vector<uint8_t> row(width / 2, 0);
    for (size_t i = 0; i < width; ++i) kv_set_q(KvDType::kInt4, row.data(), width, i, static_cast<uint32_t>(i % 16));
    for (size_t i = 0; i < width; ++i) ASSERT_EQ(kv_get_q(KvDType::kInt4, row.data(), width, i), i % 16) << width;
    // Chunk 0 of a 40-wide row has 32 elements (byte 0: elements 0 and 16); chunk 1 has 8 (byte 16: 32 and 36).
    if (width == 40) {
      EXPECT_EQ(row[0], (16 % 16) << 4 | 0);
      EXPECT_EQ(row[1], (17 % 16) << 4 | 1);
      EXPECT_EQ(row[16], (36 % 16) << 4 | (32 % 16));
    }
  }
}

TEST(KvQuant, PerTokenRoundTripsWithinHalfAScale) {
  std::mt19937 rng(5);
  for (KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    for (size_t width : {2u, 8u, 40u, 64u, 96u, 128u}) {
      Block b(type, KvScaleAxis::kPerToken, width, 16);
      const auto x = key_like_rows(16, width, rng);
      b.write(x.data(), 16);
      for (size_t r = 0; r < 16; ++r) {
        for (size_t i = 0; i < width; ++i) {
          const size_t g = i / b.group, set = width / b.group;
          const float scale = fp16_to_fp32(b.scales()[r * 2 * set + g]);
          ASSERT_LE(std::fabs(b.at(r, i) - x[r * width + i]), scale / 2 * (1 + 1e-5) + 1e-6)
              << kv_dtype_name(type) << " width " << width << " row " << r << " element " << i;
        }
      }
    }
  }
}

// A group quantized from its fp16 rows: each element within scale / 2 of its fp16 rounding, and each
// channel's pair covers the group's range.
TEST(KvQuant, PerChannelGroupsRoundTripWithinHalfAScaleOfTheirFp16Rows) {
  std::mt19937 rng(7);
  for (KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    for (size_t width : {2u, 8u, 40u, 64u}) {
      for (size_t rows : {1u, 5u, 16u, 64u}) {
        for (size_t count : {size_t{1}, size_t{7}, rows}) {
          if (count > rows) continue;
          Block b(type, KvScaleAxis::kPerChannel, width, rows);
          const auto x = key_like_rows(rows, width, rng);
          b.write(x.data(), count);
          for (size_t r = 0; r < count; ++r) {
            const uint16_t* pairs = b.scales() + r / b.group * 2 * width;
            for (size_t c = 0; c < width; ++c) {
              const float scale = fp16_to_fp32(pairs[c]), half = fp16_to_fp32(fp32_to_fp16(x[r * width + c]));
              ASSERT_LE(fp16_to_fp32(pairs[width + c]), half);
              ASSERT_LE(std::fabs(b.at(r, c) - half), scale / 2 * (1 + 1e-5) + 1e-6)
                  << kv_dtype_name(type) << " width " << width << " rows " << rows << " row " << r << " channel " << c;
            }
          }
        }
      }
    }
  }
}

TEST(KvQuant, HadamardIsOrthogonalAndItsOwnInverse) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (size_t order : {1u, 2u, 8u, 64u, 128u, 256u}) {
    std::vector<float> a(order), b(order);
    for (size_t i = 0; i < order; ++i) a[i] = n(rng), b[i] = n(rng);
    double dot = 0, norm = 0;
    for (size_t i = 0; i < order; ++i) dot += a[i] * b[i], norm += std::fabs(a[i] * b[i]);
    std::vector<float> ha = a, hb = b;
    hadamard_transform(ha.data(), order);
    hadamard_transform(hb.data(), order);
    double rotated = 0;
    for (size_t i = 0; i < order; ++i) rotated += ha[i] * hb[i];
    EXPECT_NEAR(rotated, dot, 1e-5 * (norm + 1)) << order;
    hadamard_transform(ha.data(), order);
    for (size_t i = 0; i < order; ++i) ASSERT_NEAR(ha[i], a[i], 1e-5 * (std::fabs(a[i]) + 1)) << order;
  }
}

// Every fused kernel against f32 attention over the block dequantized by kv_element, within the error
// of reordered fp32 sums: (terms + 8) unit roundoffs of the sum of absolute terms (scales folded into
// the query or the probabilities add a few roundings a term). The SIMD kernels of keys per channel
// also round the folded query f_c = q_c scale_c to integer steps d = max |f_c| / 16383 (int8 keys) or
// / 127 (int4 keys), which moves a score by at most d / 2 x sum_c q_int_c (times the attention scale).
TEST(KvQuant, FusedKernelsEqualF32AttentionOverTheDequantizedBlock) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    for (KvScaleAxis axis : {KvScaleAxis::kPerChannel, KvScaleAxis::kPerToken}) {
      for (size_t width : {8u, 40u, 64u, 128u, 576u}) {  // 576: an MLA latent (512 + 64)
        for (size_t rows : {16u, 64u}) {
          for (size_t count : {size_t{1}, size_t{5}, size_t{16}, rows}) {
            Block b(type, axis, width, rows);
            const auto x = key_like_rows(rows, width, rng);
            b.write(x.data(), count);
            std::vector<float> dq(count * width);
            for (size_t r = 0; r < count; ++r)
              for (size_t i = 0; i < width; ++i) dq[r * width + i] = b.at(r, i);
            // Query heads: the SIMD widths take one whole tile of 8 (64) and a tile and a part (128).
            const size_t nq = width == 64 ? 8 : width == 128 ? 11 : 3, stride = count + 1;
            std::vector<float> q(nq * width), probs(nq * stride);
            for (float& v : q) v = u(rng);
            for (float& v : probs) v = std::fabs(u(rng)) / static_cast<float>(count);
            const float scale = 0.125f;
            for (Isa isa : supported_isas()) {
              SCOPED_TRACE(testing::Message()
                           << isa_name(isa) << " " << kv_dtype_name(type) << " " << kv_scale_axis_name(axis)
                           << " width " << width << " rows " << rows << " count " << count);
              std::vector<float> scores(nq * stride, -7.0f);
              attention_block_scores(q.data(), nq, b.view(), count, width, scale, scores.data(), stride, isa);
              for (size_t h = 0; h < nq; ++h) {
                for (size_t s = 0; s < count; ++s) {
                  double exact = 0, abs = 0;
                  for (size_t i = 0; i < width; ++i) {
                    exact += static_cast<double>(q[h * width + i]) * dq[s * width + i];
                    abs += std::fabs(q[h * width + i]) * b.magnitude(s, i);
                  }
                  double query_rounding = 0;
                  if (axis == KvScaleAxis::kPerChannel && isa != Isa::kScalar && width % 32 == 0) {
                    const uint16_t* pairs = b.scales() + s / b.group * 2 * width;
                    double amax = 0, q_int = 0;
                    for (size_t i = 0; i < width; ++i) {
                      amax = std::max(amax, std::fabs(double{q[h * width + i]} * fp16_to_fp32(pairs[i])));
                      q_int += kv_get_q(type, b.bytes.data() + s * b.row_bytes(), width, i);
                    }
                    query_rounding = scale * amax / (type == KvDType::kInt8 ? 16383 : 127) / 2 * q_int * (1 + 1e-4);
                  }
                  ASSERT_NEAR(scores[h * stride + s], scale * exact,
                              (width + 8) * kUnit * scale * abs * 4 + query_rounding);
                }
                ASSERT_EQ(scores[h * stride + count], -7.0f) << "past the block";
              }
              if (axis != KvScaleAxis::kPerToken) continue;  // values are grouped per token only
              std::vector<float> out(nq * width, 0.5f);
              attention_block_values(probs.data(), stride, nq, b.view(), count, width, out.data(), isa);
              for (size_t h = 0; h < nq; ++h) {
                for (size_t i = 0; i < width; ++i) {
                  double exact = 0.5, abs = 0.5;
                  for (size_t s = 0; s < count; ++s) {
                    exact += static_cast<double>(probs[h * stride + s]) * dq[s * width + i];
                    abs += probs[h * stride + s] * b.magnitude(s, i);
                  }
                  ASSERT_NEAR(out[h * width + i], exact, (count + 8) * kUnit * abs * 4);
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs
