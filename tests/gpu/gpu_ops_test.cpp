// The forward pass's shaders against their CPU twins on random inputs of awkward sizes (one row, widths that are no
// multiple of a subgroup or a workgroup, several tokens), as llama.cpp's test-backend-ops does.
//
// Bounds from the arithmetic (u = 2^-24): the CPU sums in one order, the shader in another (lanes, then subgroupAdd,
// then subgroups), each sum of n terms off by at most (n - 1) u sum|terms|, so they differ by at most 2 n u sum|terms|.
// RMSNorm's CPU sum of squares is double: the shader's fp32 sum is off by n u relatively, its square root by half
// that, and inversesqrt (2 ulp in Vulkan) and two multiplications add 8 u: |dy| <= (n / 2 + 8) u |y| (+ 1e-30).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <tuple>

#include "core/thread_pool.h"
#include "gpu_test_fixture.h"
#include "model/moe_routing.h"
#include "tensor/convert.h"
#include "tensor/kv_quant.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

constexpr double kU = 0x1p-24;

// Every weight type the CPU loads, all of which the GPU's matvec and get_rows read.
constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,   DType::kQ4_0,
                                  DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kIQ4_XS,
                                  DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,   DType::kQ6_K};

// Row widths of whole blocks of `type`: one block, a few, and more blocks than a subgroup has lanes (32-value
// blocks) or several super-blocks (256).
std::vector<uint32_t> widths_of(DType type) {
  if (dtype_block_elements(type) == 256) return {256u, 2304u};
  return {32u, 96u, 2080u};
}

// A type id no shader reads: ggml's Q8_1 (an activation format, never a file's weights here).
constexpr DType kUnreadType = static_cast<DType>(9);

// The fp32 bit patterns (so -0 differs from +0, and a NaN equals itself).
std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = std::bit_cast<uint32_t>(v[i]);
  return bits;
}

class GpuOpsTest : public test::GpuTest {
 protected:
  std::mt19937 rng_{9};
};

TEST_F(GpuOpsTest, RmsnormEqualsTheCpuWithinItsBound) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (uint32_t cols : {1u, 7u, 896u, 4097u}) {
    for (uint32_t rows : {1u, 3u}) {
      std::vector<float> x(rows * cols), w(cols), want(rows * cols);
      for (float& v : x) v = normal(rng_);
      for (float& v : w) v = normal(rng_);
      for (uint32_t r = 0; r < rows; ++r) {
        rmsnorm(std::span(want).subspan(r * cols, cols), std::span(x).subspan(r * cols, cols), w, 1e-5f, Isa::kScalar);
      }
      auto xb = device_buffer(std::as_bytes(std::span(x))), wb = device_buffer(std::as_bytes(std::span(w)));
      auto yb = device_buffer(std::as_bytes(std::span(want)));  // overwritten
      ASSERT_TRUE(ops_->rmsnorm(*xb, *wb, *yb, rows, cols, 1e-5f));
      const std::vector<float> got = download(*yb, rows * cols);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), (cols / 2.0 + 8) * kU * std::fabs(want[i]) + 1e-30)
            << cols << " cols, row " << i / cols << " element " << i % cols;
      }
    }
  }
}

TEST_F(GpuOpsTest, MatvecEqualsTheCpuReferenceForEachWeightType) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(1);
  for (DType type : kWeightTypes) {
    for (uint32_t cols : widths_of(type)) {
      for (uint32_t rows : {1u, 5u, 67u}) {
        for (uint32_t tokens : {1u, 3u}) {
          WeightView view{.type = type, .rows = rows, .cols = cols};
          std::vector<std::byte> bytes(rows * view.row_bytes());
          std::vector<float> row(cols), dequantized(rows * cols);
          for (uint32_t r = 0; r < rows; ++r) {
            for (float& v : row) v = normal(rng_);
            quantize_row(type, row.data(), &bytes[r * view.row_bytes()], cols);
            dequantize_row(type, &bytes[r * view.row_bytes()], &dequantized[r * cols], cols);
          }
          view.data = bytes.data();
          std::vector<float> x(tokens * cols), want(tokens * rows);
          for (float& v : x) v = normal(rng_);
          matmul(view, x, tokens, want, pool, Isa::kScalar);  // the dequantized rows times fp32 activations
          auto wb = device_buffer(bytes), xb = device_buffer(std::as_bytes(std::span(x)));
          auto yb = device_buffer(std::vector<std::byte>(want.size() * sizeof(float), std::byte{0xff}));  // NaN
          ASSERT_TRUE(ops_->matvec(type, *wb, *xb, *yb, rows, cols, tokens));
          const std::vector<float> got = download(*yb, tokens * rows);
          for (uint32_t t = 0; t < tokens; ++t) {
            for (uint32_t r = 0; r < rows; ++r) {
              double magnitude = 0.0;
              for (uint32_t c = 0; c < cols; ++c) magnitude += std::fabs(dequantized[r * cols + c] * x[t * cols + c]);
              ASSERT_LE(std::fabs(got[t * rows + r] - want[t * rows + r]), 2.0 * (cols + 2) * kU * magnitude)
                  << dtype_name(type) << " " << rows << " x " << cols << ", token " << t << " row " << r;
            }
          }
        }
      }
    }
  }
  auto any = device_buffer(std::vector<std::byte>(1024));
  const Status refused = ops_->matvec(kUnreadType, *any, *any, *any, 1, 32, 1);
  EXPECT_EQ(refused.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(refused.message().find("q8_1"), std::string::npos) << refused.message();
  const Status partial = ops_->matvec(DType::kQ4_K, *any, *any, *any, 1, 96, 1);  // 96 of a 256-value block
  EXPECT_EQ(partial.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(partial.message().find("256"), std::string::npos) << partial.message();
  EXPECT_NE(partial.message().find("96"), std::string::npos) << partial.message();
}

// RoPE by the CPU's own angle tables: each rotated value is two products and a sum, rounded (or fused) differently
// on either side: |d| <= 2 u (|x0 c| + |x1 s|) <= 2 u (|x0| + |x1|).
TEST_F(GpuOpsTest, RopeEqualsTheCpuInBothConventions) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (bool neox : {false, true}) {
    for (uint32_t head_dim : {8u, 64u}) {
      for (uint32_t half : {head_dim / 2, head_dim / 4}) {  // a partial rotary dimension too
        const uint32_t tokens = 3, heads = 4;
        const std::vector<float> inv_freq = rope_inverse_frequencies(2 * half, 10000.0f);
        std::vector<float> x(tokens * heads * head_dim), cos(tokens * half), sin(tokens * half);
        for (float& v : x) v = normal(rng_);
        std::vector<float> want = x;
        for (uint32_t t = 0; t < tokens; ++t) {
          const std::span<float> c(&cos[t * half], half), s(&sin[t * half], half);
          rope_cos_sin(size_t{t} * 517 + 3, inv_freq, c, s);
          const std::span<float> row(&want[t * heads * head_dim], heads * head_dim);
          neox ? rope_neox(row, heads, head_dim, c, s) : rope_interleaved(row, heads, head_dim, c, s);
        }
        auto xb = device_buffer(std::as_bytes(std::span(x)));
        auto cb = device_buffer(std::as_bytes(std::span(cos))), sb = device_buffer(std::as_bytes(std::span(sin)));
        ASSERT_TRUE(ops_->rope(*xb, *cb, *sb, tokens, heads, head_dim, half, neox));
        const std::vector<float> got = download(*xb, x.size());
        for (size_t i = 0; i < got.size(); ++i) {
          const size_t in_head = i % head_dim, base = i - in_head;
          // The value's partner in its pair (itself when unrotated: then the bound is the 0 of no change).
          const size_t j = in_head >= 2 * half ? in_head
                           : neox              ? (in_head < half ? in_head + half : in_head - half)
                                               : (in_head ^ 1);
          const double bound = in_head >= 2 * half ? 0.0 : 2 * kU * (std::fabs(x[i]) + std::fabs(x[base + j]));
          ASSERT_LE(std::fabs(got[i] - want[i]), bound)
              << (neox ? "neox" : "interleaved") << " head dim " << head_dim << " half " << half << " element " << i;
        }
      }
    }
  }
}

// The Hadamard transform of rotated keys and queries: the same butterflies and the same fp32 norm, each operation
// correctly rounded on both sides, so the bits are the CPU's (rows of 1 to 256, values spread over 2^-20..2^20).
TEST_F(GpuOpsTest, HadamardEqualsTheCpuBitForBit) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (uint32_t width : {1u, 16u, 64u, 128u, 256u}) {
    const uint32_t rows = 7;
    std::vector<float> x(rows * width);
    for (float& v : x) v = std::ldexp(normal(rng_), exponent(rng_));
    std::vector<float> want = x;
    for (uint32_t r = 0; r < rows; ++r) hadamard_transform(&want[r * width], width);
    auto xb = device_buffer(std::as_bytes(std::span(x)));
    ASSERT_TRUE(ops_->hadamard(*xb, rows, width));
    const std::vector<float> got = download(*xb, x.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << "width " << width << " element " << i;
  }
  auto any = device_buffer(std::vector<std::byte>(64));
  EXPECT_EQ(ops_->hadamard(*any, 1, 12).code(), ErrorCode::kInvalidArgument);  // not a power of two
}

// SwiGLU: Vulkan's exp is within 3 + 2 |x| ulp, its division 2.5 ulp; the CPU's exp within 2e-7 relative:
// |d| <= |y| ((6 + 2 |g|) 2^-23 + 2e-7). GeGLU, the embedding scale and the residual add likewise.
TEST_F(GpuOpsTest, GatedUnitsScaleAndTheResidualAddEqualTheCpu) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (uint32_t n : {1u, 1000u}) {
    std::vector<float> gate(n), up(n);
    for (float& v : gate) v = normal(rng_);
    for (float& v : up) v = normal(rng_);
    std::vector<float> want = gate;
    swiglu(want, up);
    auto gb = device_buffer(std::as_bytes(std::span(gate))), ub = device_buffer(std::as_bytes(std::span(up)));
    ASSERT_TRUE(ops_->swiglu(*gb, *ub, n));
    const std::vector<float> got = download(*gb, n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(got[i] - want[i]), std::fabs(want[i]) * ((6 + 2 * std::fabs(gate[i])) * 0x1p-23 + 2e-7))
          << "gate " << gate[i] << " up " << up[i];
    }
    // GeGLU: u = g (a + b g^2) is 3 roundings either side (|du| <= 3 |u| 2^-24 each), the exp of each is within
    // (3 + 2 |u|) ulp (Vulkan) or 2e-7 (the CPU) of e^u, and an error in e moves g / (1 + e) by at most e's relative
    // error; the division and product add 3 ulp: |d| <= |y| ((6 + 5 |u|) 2^-23 + 2e-7).
    std::vector<float> want_gelu = gate;
    geglu(want_gelu, up);
    auto gelu = device_buffer(std::as_bytes(std::span(gate)));
    ASSERT_TRUE(ops_->geglu(*gelu, *ub, n));
    const std::vector<float> got_gelu = download(*gelu, n);
    for (uint32_t i = 0; i < n; ++i) {
      const float g = gate[i], u = std::fabs(g * (-1.5957691f - 0.0713548f * g * g));
      ASSERT_LE(std::fabs(got_gelu[i] - want_gelu[i]), std::fabs(want_gelu[i]) * ((6 + 5 * u) * 0x1p-23 + 2e-7))
          << "gate " << g << " up " << up[i];
    }
    // x *= factor and x += y are one fp32 operation on either side: the same bits.
    std::vector<float> scaled = gate;
    for (float& v : scaled) v *= std::sqrt(640.0f);
    auto sb = device_buffer(std::as_bytes(std::span(gate)));
    ASSERT_TRUE(ops_->scale(*sb, n, std::sqrt(640.0f)));
    EXPECT_EQ(download(*sb, n), scaled);
    std::vector<float> sum = gate;
    for (uint32_t i = 0; i < n; ++i) sum[i] += up[i];
    auto xb = device_buffer(std::as_bytes(std::span(gate)));
    ASSERT_TRUE(ops_->add(*xb, *ub, n));
    EXPECT_EQ(download(*xb, n), sum);
  }
}

// A mixture's routing on the device: 64 experts, 6 chosen, softmax and sigmoid gating, weights normalized and scaled
// or not: each token's experts are the CPU's route_token's, in its order, and their weights within 4 ulp of the
// probability (Vulkan's exp within 3 + 2|x| ulp is well inside the gaps between the logits drawn here: the choice
// cannot flip), relative 2^-20 after normalization. Then the experts' outputs summed in expert-index order over the
// shared experts' (moe_combine) equal the CPU's sum in that order within the products' rounding.
TEST_F(GpuOpsTest, MoeRoutingChoosesTheCpusExpertsAndAddsThemInIndexOrder) {
  const uint32_t tokens = 50, experts = 64, dim = 24;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const auto& [gating, normalize, scale] :
       {std::tuple{ExpertGating::kSoftmax, false, 1.0f}, std::tuple{ExpertGating::kSoftmax, true, 16.0f},
        std::tuple{ExpertGating::kSigmoid, true, 2.5f}}) {
    const MoeConfig moe{.num_experts = experts,
                        .experts_used = 6,
                        .shared_experts = 1,
                        .expert_ffn_dim = 8,
                        .gating = gating,
                        .normalize_weights = normalize,
                        .weights_scale = scale};
    std::vector<float> logits(tokens * experts);
    for (float& v : logits) v = normal(rng_);
    auto lb = device_buffer(logits), ib = device_buffer(std::vector<uint32_t>(tokens * 6)),
         wb = device_buffer(std::vector<float>(tokens * 6));
    ASSERT_TRUE(ops_->moe_route(*lb, *ib, *wb, tokens, moe));
    const std::vector<uint32_t> ids = download<uint32_t>(*ib, tokens * 6);
    const std::vector<float> weights = download(*wb, tokens * 6);
    std::vector<float> scores(experts);
    std::vector<ExpertChoice> chosen(6);
    for (uint32_t t = 0; t < tokens; ++t) {
      route_token(std::span(logits).subspan(t * experts, experts), moe, scores, chosen);
      for (size_t j = 0; j < 6; ++j) {
        ASSERT_EQ(ids[t * 6 + j], chosen[j].expert) << "token " << t << " choice " << j;
        EXPECT_NEAR(weights[t * 6 + j], chosen[j].weight, std::fabs(chosen[j].weight) * 0x1p-20)
            << "token " << t << " choice " << j;
      }
    }
    // out = shared + sum over the choices in expert-index order of weight x y.
    std::vector<float> shared(tokens * dim), y(tokens * 6 * dim);
    for (float& v : shared) v = normal(rng_);
    for (float& v : y) v = normal(rng_);
    std::vector<float> want = shared;
    for (uint32_t t = 0; t < tokens; ++t) {
      std::vector<size_t> order{0, 1, 2, 3, 4, 5};
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[t * 6 + a] < ids[t * 6 + b]; });
      for (size_t j : order)
        for (uint32_t d = 0; d < dim; ++d) want[t * dim + d] += weights[t * 6 + j] * y[(t * 6 + j) * dim + d];
    }
    auto ob = device_buffer(shared), yb = device_buffer(y);
    ASSERT_TRUE(ops_->moe_combine(*ob, *yb, *ib, *wb, tokens, dim, moe));
    EXPECT_EQ(download(*ob, tokens * dim), want);  // the same products and sums in the same order, unfused
  }
}

// The token embedding: rows picked by id and dequantized exactly as the CPU's dequantize_row (the same bits, signed
// zeros included).
TEST_F(GpuOpsTest, GetRowsEqualsTheCpuDequantization) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint32_t rows = 50;
  const std::vector<uint32_t> ids{49, 0, 7, 7, 23};
  for (DType type : kWeightTypes) {
    const uint32_t cols = dtype_block_elements(type) == 256 ? 512 : 96;  // whole blocks, more than one
    const size_t row_bytes = dtype_row_bytes(type, cols);
    std::vector<std::byte> table(rows * row_bytes);
    std::vector<float> row(cols), want(ids.size() * cols);
    for (uint32_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng_);
      quantize_row(type, row.data(), &table[r * row_bytes], cols);
    }
    for (size_t t = 0; t < ids.size(); ++t) dequantize_row(type, &table[ids[t] * row_bytes], &want[t * cols], cols);
    auto tb = device_buffer(table), ib = device_buffer(std::as_bytes(std::span(ids)));
    auto ob = device_buffer(std::vector<std::byte>(want.size() * sizeof(float), std::byte{0xff}));  // NaN
    ASSERT_TRUE(ops_->get_rows(type, *tb, *ib, *ob, static_cast<uint32_t>(ids.size()), cols));
    const std::vector<float> got = download(*ob, want.size());
    const std::vector<uint32_t> got_bits = bits_of(got), want_bits = bits_of(want);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got_bits[i], want_bits[i])
          << dtype_name(type) << " token " << i / cols << " value " << i % cols << ": " << got[i] << " for " << want[i];
    }
  }
  auto any = device_buffer(std::vector<std::byte>(1024));
  const Status refused = ops_->get_rows(kUnreadType, *any, *any, *any, 1, 32);
  EXPECT_EQ(refused.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(refused.message().find("q8_1"), std::string::npos) << refused.message();
  EXPECT_EQ(ops_->get_rows(DType::kQ4_0, *any, *any, *any, 1, 48).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvs
