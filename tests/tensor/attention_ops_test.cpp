// The attention block kernels: every SIMD path against an fp64 reference (scores) and against the scalar
// path bit for bit (values: one fused multiply-add per element in position order on every path), over
// head dims with every tail length, GQA group sizes and block sizes including ragged last blocks.
#include "tensor/attention_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"

namespace kvs {
namespace {

constexpr double kScoreTol = 1e-5;  // of scale x sum |q_i k_i|: reordered fp32 sums

// Head dims with every tail length against vectors of 16 and slices of 32 and 64 floats, and an MLA latent (576);
// groups that take every tiling (16 and 13 heads: eight at a time, then four, then one); blocks of up to 33 rows
// (odd, and past the 16 rows a values pass takes at once).
const std::vector<size_t> kHeadDims = {1, 7, 16, 33, 64, 80, 128, 130, 576};
const std::vector<size_t> kGroups = {1, 3, 8, 13, 16};
const std::vector<size_t> kCounts = {1, 3, 4, 5, 16, 17, 33};

std::vector<float> random_vec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// fn(head_dim, query heads, positions in the block) for every combination of the lists above.
template <class Fn>
void for_each_shape(const Fn& fn) {
  for (size_t hd : kHeadDims)
    for (size_t nq : kGroups)
      for (size_t count : kCounts) fn(hd, nq, count);
}

TEST(AttentionOpsTest, ScoresMatchFp64OnEveryIsa) {
  std::mt19937 rng(11);
  for_each_shape([&](size_t hd, size_t nq, size_t count) {
    const auto q = random_vec(nq * hd, rng), keys = random_vec(count * hd, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const size_t stride = count + 2;  // the two extra entries per head must stay untouched
    for (Isa isa : supported_isas()) {
      std::vector<float> scores(nq * stride, -7.0f);
      attention_block_scores(q.data(), nq, keys.data(), count, hd, scale, scores.data(), stride, isa);
      for (size_t h = 0; h < nq; ++h) {
        for (size_t s = 0; s < count; ++s) {
          double exact = 0.0, abs = 0.0;
          for (size_t i = 0; i < hd; ++i) {
            const double p = static_cast<double>(q[h * hd + i]) * keys[s * hd + i];
            exact += p;
            abs += std::fabs(p);
          }
          ASSERT_NEAR(scores[h * stride + s], scale * exact, kScoreTol * scale * abs + 1e-30)
              << isa_name(isa) << " head dim " << hd << " head " << h << " position " << s;
        }
        EXPECT_EQ(scores[h * stride + count], -7.0f) << isa_name(isa) << " wrote past the block";
        EXPECT_EQ(scores[h * stride + count + 1], -7.0f) << isa_name(isa) << " wrote past the block";
      }
    }
  });
}

TEST(AttentionOpsTest, AHeadsScoresDoNotDependOnItsGroup) {
  // Each head's scores in a group of nq, on each isa, equal bit for bit that head's scores alone: the tilings
  // (eight heads by two rows, four by four, one by four) sum every (head, row) in the same order. The engine's
  // split of a query group over threads keeps its bits by this.
  std::mt19937 rng(17);
  for_each_shape([&](size_t hd, size_t nq, size_t count) {
    const auto q = random_vec(nq * hd, rng), keys = random_vec(count * hd, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (Isa isa : supported_isas()) {
      std::vector<float> group(nq * count), alone(count);
      attention_block_scores(q.data(), nq, keys.data(), count, hd, scale, group.data(), count, isa);
      for (size_t h = 0; h < nq; ++h) {
        attention_block_scores(&q[h * hd], 1, keys.data(), count, hd, scale, alone.data(), count, isa);
        for (size_t s = 0; s < count; ++s)
          ASSERT_EQ(std::bit_cast<uint32_t>(group[h * count + s]), std::bit_cast<uint32_t>(alone[s]))
              << isa_name(isa) << " head dim " << hd << " group " << nq << " head " << h << " row " << s;
      }
    }
  });
}

TEST(AttentionOpsTest, ValuesEqualScalarBitForBitAndAccumulate) {
  std::mt19937 rng(12);
  for_each_shape([&](size_t hd, size_t nq, size_t count) {
    const auto values = random_vec(count * hd, rng), probs = random_vec(nq * count, rng);
    const auto out0 = random_vec(nq * hd + 1, rng);  // the extra float must stay untouched
    auto ref = out0;
    attention_block_values(probs.data(), count, nq, values.data(), count, hd, ref.data(), Isa::kScalar);
    for (size_t h = 0; h < nq; ++h) {  // out accumulates: check one element against its definition
      double expect = out0[h * hd];
      for (size_t s = 0; s < count; ++s) expect += static_cast<double>(probs[h * count + s]) * values[s * hd];
      EXPECT_NEAR(ref[h * hd], expect, 1e-5);
    }
    for (Isa isa : supported_isas()) {
      auto out = out0;
      attention_block_values(probs.data(), count, nq, values.data(), count, hd, out.data(), isa);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], ref[i]) << isa_name(isa) << " head dim " << hd << " group " << nq << " index " << i;
    }
  });
}

TEST(AttentionOpsTest, BlocksOfAnySizeGiveTheSameValueSums) {
  // A context cut into blocks of 1, 5 or 16 positions: the weighted value sums are identical.
  std::mt19937 rng(13);
  const size_t hd = 64, nq = 4, n = 37;
  const auto values = random_vec(n * hd, rng), probs = random_vec(nq * n, rng);
  for (Isa isa : supported_isas()) {
    std::vector<float> whole(nq * hd, 0.0f);
    attention_block_values(probs.data(), n, nq, values.data(), n, hd, whole.data(), isa);
    for (size_t block : {1, 5, 16}) {
      std::vector<float> out(nq * hd, 0.0f);
      for (size_t first = 0; first < n; first += block) {
        attention_block_values(&probs[first], n, nq, &values[first * hd], std::min(block, n - first), hd, out.data(),
                               isa);
      }
      EXPECT_EQ(out, whole) << isa_name(isa) << " block " << block;
    }
  }
}

// K/V rows stored as 16-bit elements, with their exact fp32 values (what every kernel must read).
struct HalfRows {
  std::vector<uint16_t> bits;
  std::vector<float> exact;
};

HalfRows to_half_rows(KvDType type, const std::vector<float>& values) {
  HalfRows rows;
  for (float v : values) {
    const uint16_t b = type == KvDType::kF16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
    rows.bits.push_back(b);
    rows.exact.push_back(type == KvDType::kF16 ? fp16_to_fp32(b) : bf16_to_fp32(b));
  }
  return rows;
}

TEST(AttentionOpsTest, HalfPrecisionKeysScoreAsTheirFp32Values) {
  // f16 and bf16 keys give, on every isa, the scores of the fp32 keys they stand for: the widening is
  // exact, so the f32 kernel on the widened keys is the reference (same sums, same order).
  std::mt19937 rng(14);
  for (KvDType type : {KvDType::kF16, KvDType::kBF16}) {
    for_each_shape([&](size_t hd, size_t nq, size_t count) {
      const auto q = random_vec(nq * hd, rng);
      const HalfRows keys = to_half_rows(type, random_vec(count * hd, rng));
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (Isa isa : supported_isas()) {
        std::vector<float> expect(nq * count), got(nq * count);
        attention_block_scores(q.data(), nq, keys.exact.data(), count, hd, scale, expect.data(), count, isa);
        attention_block_scores(q.data(), nq, KvRows{keys.bits.data(), type}, count, hd, scale, got.data(), count, isa);
        ASSERT_EQ(got, expect) << kv_dtype_name(type) << " " << isa_name(isa) << " head dim " << hd << " count "
                               << count;
      }
    });
  }
}

TEST(AttentionOpsTest, HalfPrecisionValuesSumAsTheirFp32Values) {
  std::mt19937 rng(15);
  for (KvDType type : {KvDType::kF16, KvDType::kBF16}) {
    for_each_shape([&](size_t hd, size_t nq, size_t count) {
      const HalfRows values = to_half_rows(type, random_vec(count * hd, rng));
      const auto probs = random_vec(nq * count, rng), out0 = random_vec(nq * hd, rng);
      for (Isa isa : supported_isas()) {
        auto expect = out0, got = out0;
        attention_block_values(probs.data(), count, nq, values.exact.data(), count, hd, expect.data(), isa);
        attention_block_values(probs.data(), count, nq, KvRows{values.bits.data(), type}, count, hd, got.data(), isa);
        ASSERT_EQ(got, expect) << kv_dtype_name(type) << " " << isa_name(isa) << " head dim " << hd << " count "
                               << count;
      }
    });
  }
}

TEST(AttentionOpsTest, StoredRowsRoundLikeTheScalarConversions) {
  // Random values over a wide exponent range, plus the edges: ties, f16 subnormals and overflow, infinities.
  std::mt19937 rng(16);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::vector<float> src;
  for (int i = 0; i < 997; ++i) src.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 6e-8f, 3e-5f, -7e-6f,
                  65504.0f, 65520.0f, 1e9f, -1e30f, inf, -inf, 1e-40f}) {
    src.push_back(v);
  }
  src.push_back(std::numeric_limits<float>::quiet_NaN());
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16}) {
    for (size_t n : {src.size(), size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{17}}) {
      const std::vector<float> part(src.end() - static_cast<std::ptrdiff_t>(n), src.end());
      for (Isa isa : supported_isas()) {
        const size_t row_bytes = n * (type == KvDType::kF32 ? 4 : 2);
        std::vector<uint32_t> out(n + 1);  // room for f32 and one more word; 16-bit rows use the first half
        auto* bytes = reinterpret_cast<uint8_t*>(out.data());
        std::fill(bytes, bytes + out.size() * 4, uint8_t{0xa5});
        store_kv_row(type, part.data(), out.data(), n, isa);
        for (size_t i = 0; i < n; ++i) {
          const float v = part[i];
          if (type == KvDType::kF32) {
            ASSERT_EQ(out[i], std::bit_cast<uint32_t>(v));
            continue;
          }
          const uint16_t got = reinterpret_cast<const uint16_t*>(out.data())[i];
          const uint16_t expect = type == KvDType::kF16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
          const float widened = type == KvDType::kF16 ? fp16_to_fp32(got) : bf16_to_fp32(got);
          if (std::isnan(v)) {
            EXPECT_TRUE(std::isnan(widened)) << kv_dtype_name(type) << " " << isa_name(isa);
          } else {
            ASSERT_EQ(got, expect) << kv_dtype_name(type) << " " << isa_name(isa) << " value " << v << " index " << i;
          }
        }
        for (size_t b = row_bytes; b < out.size() * 4; ++b)
          ASSERT_EQ(bytes[b], 0xa5) << kv_dtype_name(type) << " " << isa_name(isa) << " wrote past " << n
                                    << " elements";
      }
    }
  }
}

}  // namespace
}  // namespace kvs
