// The small kernels: every SIMD path against the scalar reference (and an fp64 reference where the
// scalar one is itself approximate), on sizes with every tail length.
#include "tensor/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace kvs {
namespace {

// Tolerances (relative):
constexpr double kDotTol = 1e-5;      // of sum |a_i b_i|: reordered fp32 sums
constexpr double kAxpyTol = 2e-7;     // of |y| + |a x|: one fused vs two rounded operations
constexpr double kRmsnormTol = 1e-6;  // of |out|: the sum of squares is fp64 on every path
constexpr double kSoftmaxTol = 2e-6;  // of each probability: vector exp (~2e-7) + reordered sum
constexpr double kSwigluTol = 2e-6;   // of |silu(g) * up|: vector exp + division

const std::vector<size_t> kSizes = {1, 7, 8, 15, 16, 17, 33, 100, 1000, 4096 + 5};

std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (Isa isa : supported_isas())
    if (isa != Isa::kScalar) out.push_back(isa);
  return out;
}

TEST(OpsTest, DotMatchesFp64) {
  std::mt19937 rng(1);
  for (size_t n : kSizes) {
    const auto a = random_vec(n, rng), b = random_vec(n, rng);
    double exact = 0.0, abs = 0.0;
    for (size_t i = 0; i < n; ++i) {
      exact += static_cast<double>(a[i]) * b[i];
      abs += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    for (Isa isa : supported_isas())
      EXPECT_NEAR(dot_f32(a.data(), b.data(), n, isa), exact, kDotTol * abs) << isa_name(isa) << " n " << n;
  }
}

TEST(OpsTest, AxpyMatchesScalar) {
  std::mt19937 rng(2);
  for (size_t n : kSizes) {
    const auto x = random_vec(n, rng), y0 = random_vec(n, rng);
    auto ref = y0;
    axpy_f32(0.37f, x.data(), ref.data(), n, Isa::kScalar);
    for (Isa isa : simd_isas()) {
      auto y = y0;
      y.push_back(12345.0f);  // must stay untouched
      axpy_f32(0.37f, x.data(), y.data(), n, isa);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(y[i], ref[i], kAxpyTol * (std::fabs(y0[i]) + std::fabs(0.37f * x[i]))) << isa_name(isa);
      EXPECT_EQ(y[n], 12345.0f) << isa_name(isa) << " wrote past the end, n " << n;
    }
  }
}

TEST(OpsTest, RmsnormMatchesScalarAndMayAlias) {
  std::mt19937 rng(3);
  for (size_t n : kSizes) {
    const auto x = random_vec(n, rng, -3.0f, 3.0f), w = random_vec(n, rng, 0.5f, 1.5f);
    std::vector<float> ref(n);
    rmsnorm(ref, x, w, 1e-5f, Isa::kScalar);
    for (Isa isa : simd_isas()) {
      auto inplace = x;
      rmsnorm(inplace, inplace, w, 1e-5f, isa);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(inplace[i], ref[i], kRmsnormTol * std::fabs(ref[i]) + 1e-30) << isa_name(isa);
    }
  }
}

TEST(OpsTest, SoftmaxMatchesScalarOverWideRanges) {
  std::mt19937 rng(4);
  for (size_t n : kSizes) {
    for (float range : {1.0f, 20.0f, 80.0f}) {
      const auto x = random_vec(n, rng, -range, range);
      auto ref = x;
      softmax(ref, Isa::kScalar);
      for (Isa isa : simd_isas()) {
        auto y = x;
        softmax(y, isa);
        float sum = 0.0f;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_NEAR(y[i], ref[i], kSoftmaxTol * ref[i] + 1e-37) << isa_name(isa) << " n " << n << " i " << i;
          sum += y[i];
        }
        EXPECT_NEAR(sum, 1.0f, 1e-5f);
      }
    }
  }
}

TEST(OpsTest, SoftmaxGivesExactZerosForMinusInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : supported_isas()) {
    std::vector<float> x = {0.0f,    -inf, 1.0f, -inf, -inf, 0.5f, -inf, -inf, -inf,
                            -200.0f, -inf, -inf, -inf, -inf, -inf, -inf, -inf, 2.0f};
    softmax(x, isa);
    for (size_t i : {1, 3, 4, 6, 9, 10, 16}) EXPECT_EQ(x[i], 0.0f) << isa_name(isa) << " " << i;
    EXPECT_GT(x[17], x[2]);
  }
}

TEST(OpsTest, SwigluMatchesScalarIncludingLargeInputs) {
  std::mt19937 rng(5);
  for (size_t n : kSizes) {
    auto g = random_vec(n, rng, -20.0f, 20.0f);
    const auto up = random_vec(n, rng, -2.0f, 2.0f);
    const float big[] = {-100.0f, 100.0f, -88.5f, 89.5f, 0.0f, -1e-30f, 30.0f};
    for (size_t i = 0; i < std::size(big) && i < n; ++i) g[i] = big[i];
    auto ref = g;
    swiglu(ref, up, Isa::kScalar);
    for (Isa isa : simd_isas()) {
      auto y = g;
      swiglu(y, up, isa);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << isa_name(isa) << " g " << g[i];
        ASSERT_NEAR(y[i], ref[i], kSwigluTol * std::fabs(ref[i]) + 1e-37) << isa_name(isa) << " g " << g[i];
      }
    }
  }
}

// The scalar form against GELU in double (x / (1 + exp(-2u)) is the tanh form rewritten, exact in real numbers), and
// every SIMD path against the scalar one. Tolerance: z = -2u is computed to a few ulps, and exp(z) turns z's
// absolute error (|z| x ~4 x 2^-24) into a relative one, so |z| x 3e-7, plus a few ulps of the rest.
TEST(OpsTest, GegluIsTanhGeluTimesUpOnEveryPath) {
  const auto tolerance = [](float x, double value) {
    const double z = std::fabs(2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x));
    return (2e-6 + 3e-7 * z) * std::fabs(value) + 1e-30;
  };
  std::mt19937 rng(8);
  for (size_t n : kSizes) {
    auto g = random_vec(n, rng, -8.0f, 8.0f);
    const auto up = random_vec(n, rng, -2.0f, 2.0f);
    const float big[] = {-100.0f, 100.0f, -12.0f, 12.0f, 0.0f, -1e-30f, 30.0f};
    for (size_t i = 0; i < std::size(big) && i < n; ++i) g[i] = big[i];
    auto ref = g;
    geglu(ref, up, Isa::kScalar);
    for (size_t i = 0; i < n; ++i) {
      const double x = g[i], u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      // 1 + tanh(u) cancels for u << 0, so the double reference is the exp form; both agree where neither cancels.
      const double want = x / (1.0 + std::exp(-2.0 * u)) * up[i];
      if (x > -3.0) {
        ASSERT_NEAR(want, 0.5 * x * (1.0 + std::tanh(u)) * up[i], 1e-12);
      }
      ASSERT_NEAR(ref[i], want, tolerance(g[i], want)) << "g " << g[i];
    }
    for (Isa isa : simd_isas()) {
      auto y = g;
      geglu(y, up, isa);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << isa_name(isa) << " g " << g[i];
        ASSERT_NEAR(y[i], ref[i], tolerance(g[i], ref[i])) << isa_name(isa) << " g " << g[i];
      }
    }
  }
}

// NeoX pairs (i, i + d/2) are the interleaved pairs (2i, 2i + 1) of the head with its halves interleaved: the
// same rotation, bit for bit, on permuted dimensions (dimensions past rope_dim untouched).
TEST(RopeTest, NeoxIsInterleavedOnPermutedDimensions) {
  std::mt19937 rng(9);
  const size_t n_heads = 3, head_dim = 48;
  for (size_t rope_dim : {48, 32}) {
    const auto inv_freq = rope_inverse_frequencies(rope_dim, 10000.0f);
    std::vector<float> cos(rope_dim / 2), sin(rope_dim / 2);
    rope_cos_sin(37, inv_freq, cos, sin);
    const auto x = random_vec(n_heads * head_dim, rng, -1.0f, 1.0f);
    std::vector<float> neox = x, permuted = x;
    const size_t half = rope_dim / 2;
    for (size_t h = 0; h < n_heads; ++h) {
      for (size_t i = 0; i < half; ++i) {
        permuted[h * head_dim + 2 * i] = x[h * head_dim + i];
        permuted[h * head_dim + 2 * i + 1] = x[h * head_dim + i + half];
      }
    }
    rope_neox(neox, n_heads, head_dim, cos, sin);
    rope_interleaved(permuted, n_heads, head_dim, cos, sin);
    for (size_t h = 0; h < n_heads; ++h) {
      for (size_t i = 0; i < half; ++i) {
        EXPECT_EQ(neox[h * head_dim + i], permuted[h * head_dim + 2 * i]) << rope_dim << " " << i;
        EXPECT_EQ(neox[h * head_dim + i + half], permuted[h * head_dim + 2 * i + 1]) << rope_dim << " " << i;
      }
      for (size_t d = rope_dim; d < head_dim; ++d) EXPECT_EQ(neox[h * head_dim + d], x[h * head_dim + d]);
    }
  }
}

TEST(RopeTest, PrecomputedTablesGiveTheSameBitsAsTheOneCallForm) {
  std::mt19937 rng(6);
  const size_t n_heads = 3, head_dim = 64;
  for (size_t rope_dim : {64, 32}) {
    const auto inv_freq = rope_inverse_frequencies(rope_dim, 10000.0f);
    for (size_t pos : {0, 1, 17, 4095}) {
      const auto x = random_vec(n_heads * head_dim, rng);
      auto a = x, b = x;
      rope_interleaved(a, n_heads, head_dim, rope_dim, pos, 10000.0f);
      std::vector<float> cos(rope_dim / 2), sin(rope_dim / 2);
      rope_cos_sin(pos, inv_freq, cos, sin);
      rope_interleaved(b, n_heads, head_dim, cos, sin);
      EXPECT_EQ(a, b);
      // Against fp64, and dimensions past rope_dim untouched.
      for (size_t h = 0; h < n_heads; ++h)
        for (size_t i = 0; i < head_dim; i += 2) {
          const size_t k = h * head_dim + i;
          if (i >= rope_dim) {
            EXPECT_EQ(a[k], x[k]);
            continue;
          }
          const double angle = static_cast<double>(pos) * std::pow(10000.0, -static_cast<double>(i) / rope_dim);
          const double c = std::cos(angle), s = std::sin(angle);
          // fp32 angles: pos * freq carries ~pos * 2^-24 rad of rounding.
          const double tol = 1e-5 + static_cast<double>(pos) * 1.2e-7;
          EXPECT_NEAR(a[k], x[k] * c - x[k + 1] * s, tol);
          EXPECT_NEAR(a[k + 1], x[k] * s + x[k + 1] * c, tol);
        }
    }
  }
}

}  // namespace
}  // namespace kvs
