// The attention block kernels: every SIMD path against an fp64 reference (scores) and against the scalar
// path bit for bit (values: one fused multiply-add per element in position order on every path), over
// head dims with every tail length, GQA group sizes and block sizes including ragged last blocks.
#include "tensor/attention_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace kvs {
namespace {

constexpr double kScoreTol = 1e-5;  // of scale x sum |q_i k_i|: reordered fp32 sums

const std::vector<size_t> kHeadDims = {1, 7, 16, 33, 64, 80, 128, 130};
const std::vector<size_t> kGroups = {1, 3, 8};
const std::vector<size_t> kCounts = {1, 3, 4, 5, 16, 17};

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

}  // namespace
}  // namespace kvs
