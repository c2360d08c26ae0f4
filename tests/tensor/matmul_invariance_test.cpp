// Batch invariance of matmul (see matmul.h): for one Isa, a token's outputs are bitwise the same alone
// (n = 1, the decode kernel) as inside a batch of any size (the tiled prefill kernel), whatever the other
// tokens hold, however the rows are split over threads or matmul_rows ranges, and through matmul_quantized.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/act_quant.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace kvs {
namespace {

using test::TestMatrix;

const std::vector<size_t> kTokens = {1, 2, 3, 5, 8, 17, 64};
// Around every segment size (512 and 1024 columns) and decode's runs of 4 and 2 segments; odd block counts
// (3, 65, 97 blocks) take the odd-last-block path of the quantized kernels.
const std::vector<size_t> kFloatCols = {7, 32, 33, 96, 1000, 2080, 3104};
const std::vector<size_t> kQuantCols = {32, 96, 1024, 2080, 3104};
constexpr size_t kRows = 37;  // full 4-row tiles, then a 1-row tile; 2-thread splits at row 32

// K-quants: whole super-blocks, one and several segments (2048 columns), an odd number of super-blocks.
const std::vector<size_t> kKQuantCols = {256, 1024, 2048 + 256, 3072 + 768};

bool is_quant(DType t) { return is_block_quantized(t); }
const std::vector<size_t>& cols_for(DType t) {
  return is_k_quant(t) ? kKQuantCols : is_quant(t) ? kQuantCols : kFloatCols;
}

// Bitwise comparison of token t's outputs ([rows] floats) with the expected ones; reports the first miss.
void expect_same_bits(const float* got, const float* want, size_t rows, const std::string& what) {
  if (std::memcmp(got, want, rows * sizeof(float)) == 0) return;
  for (size_t r = 0; r < rows; ++r) {
    uint32_t g, w;
    std::memcpy(&g, got + r, sizeof g);
    std::memcpy(&w, want + r, sizeof w);
    if (g != w) {
      ADD_FAILURE() << what << " row " << r << ": got " << got[r] << " (0x" << std::hex << g << "), alone " << want[r]
                    << " (0x" << w << ")" << std::dec;
      return;
    }
  }
}

std::string describe(DType type, Isa isa, size_t cols, size_t n) {
  return std::string(dtype_name(type)) + " " + std::string(isa_name(isa)) + " cols " + std::to_string(cols) +
         " tokens " + std::to_string(n);
}

// Every token's rows of y ([n][rows]) against that token computed alone.
void expect_matches_alone(const std::vector<float>& y, const std::vector<std::vector<float>>& alone, size_t n,
                          const std::string& what) {
  for (size_t t = 0; t < n; ++t)
    expect_same_bits(y.data() + t * kRows, alone[t].data(), kRows, what + " token " + std::to_string(t));
}

class MatmulInvarianceTest : public testing::TestWithParam<DType> {};

TEST_P(MatmulInvarianceTest, TokenOutputsDoNotDependOnTheBatch) {
  const DType type = GetParam();
  std::mt19937 rng(2024 + static_cast<int>(type));
  ThreadPool one(1), two(2);
  for (size_t cols : cols_for(type)) {
    const TestMatrix w = test::make_matrix(type, kRows, cols, rng);
    for (size_t n : kTokens) {
      const std::vector<float> x = test::make_activations(n, cols, rng);
      // The same tokens in reverse order, and the batch with every other token replaced.
      std::vector<float> reversed(n * cols), mixed = test::make_activations(n, cols, rng);
      for (size_t t = 0; t < n; ++t) {
        std::copy_n(x.begin() + t * cols, cols, reversed.begin() + (n - 1 - t) * cols);
        if (t % 2 == 0) std::copy_n(x.begin() + t * cols, cols, mixed.begin() + t * cols);
      }
      for (Isa isa : supported_isas()) {
        const std::string what = describe(type, isa, cols, n);
        std::vector<std::vector<float>> alone(n, std::vector<float>(kRows));
        for (size_t t = 0; t < n; ++t) matmul(w.view(), std::span(x).subspan(t * cols, cols), 1, alone[t], one, isa);

        std::vector<float> y(n * kRows), y2(n * kRows);
        matmul(w.view(), x, n, y, one, isa);
        expect_matches_alone(y, alone, n, what);

        matmul(w.view(), x, n, y2, two, isa);
        expect_matches_alone(y2, alone, n, what + " 2 threads");

        matmul(w.view(), reversed, n, y2, one, isa);
        for (size_t t = 0; t < n; ++t)
          expect_same_bits(y2.data() + (n - 1 - t) * kRows, alone[t].data(), kRows,
                           what + " reversed batch, token " + std::to_string(t));

        matmul(w.view(), mixed, n, y2, two, isa);
        for (size_t t = 0; t < n; t += 2)
          expect_same_bits(y2.data() + t * kRows, alone[t].data(), kRows,
                           what + " other tokens changed, token " + std::to_string(t));

        // Uneven row ranges: tiles of every height start at odd rows.
        std::fill(y2.begin(), y2.end(), -1.0f);
        for (auto [begin, end] : {std::pair<size_t, size_t>{0, 3}, {3, 4}, {4, 19}, {19, 30}, {30, kRows}})
          matmul_rows(w.view(), x, n, y2, begin, end, isa);
        expect_matches_alone(y2, alone, n, what + " matmul_rows");

        if (is_quant(type)) {
          // Through matmul_quantized: the same bits as matmul where matmul quantizes the activations too;
          // Isa::kScalar's integer reference (matmul's scalar path is the fp32 one) against itself alone.
          QuantizedActivations xq, xq_alone;
          quantize_activations(x, n, cols, xq, two, isa);
          std::vector<std::vector<float>> alone_q(n, std::vector<float>(kRows));
          for (size_t t = 0; t < n; ++t) {
            quantize_activations(std::span(x).subspan(t * cols, cols), 1, cols, xq_alone, one, isa);
            matmul_quantized(w.view(), xq_alone, alone_q[t], one, isa);
          }
          matmul_quantized(w.view(), xq, y2, two, isa);
          expect_matches_alone(y2, alone_q, n, what + " matmul_quantized");
          if (matmul_activations(type, isa) == MatmulActivations::kInt8Blocks)
            expect_matches_alone(y, alone_q, n, what + " matmul vs matmul_quantized");
        }
      }
    }
  }
}

// Decode of a row range split differently (one thread, two threads, per-row calls) with wide rows: the
// shapes of a model's matrices, where decode runs several segments of a row side by side.
TEST_P(MatmulInvarianceTest, DecodeMatchesPrefillOnWideRows) {
  const DType type = GetParam();
  std::mt19937 rng(77);
  ThreadPool one(1), two(2);
  const size_t cols = 5632;
  const TestMatrix w = test::make_matrix(type, kRows, cols, rng);
  const size_t n = 9;
  const std::vector<float> x = test::make_activations(n, cols, rng);
  for (Isa isa : supported_isas()) {
    std::vector<float> y(n * kRows), y_alone(kRows), y_rows(kRows);
    matmul(w.view(), x, n, y, two, isa);
    for (size_t t = 0; t < n; ++t) {
      const auto xt = std::span(x).subspan(t * cols, cols);
      matmul(w.view(), xt, 1, y_alone, t % 2 == 0 ? one : two, isa);
      expect_same_bits(y.data() + t * kRows, y_alone.data(), kRows, describe(type, isa, cols, n));
      for (size_t r = 0; r < kRows; ++r) matmul_rows(w.view(), xt, 1, y_rows, r, r + 1, isa);
      expect_same_bits(y_rows.data(), y_alone.data(), kRows, describe(type, isa, cols, 1) + " row by row");
    }
  }
}

// Several matrices in one pass (matmul_quantized_group, as the forward pass runs Q/K/V and gate/up):
// every y bitwise what matmul_quantized gives alone, for decode and batches, on one and two threads; also for a
// group of K-quant types and Q8_0 as a Q4_K_M file mixes them.
TEST(MatmulInvarianceTest, QuantizedGroupEqualsOneMatrixAtATime) {
  std::mt19937 rng(91);
  ThreadPool one(1), two(2);
  const size_t cols = 1024;
  const std::vector<std::array<DType, 3>> groups = {{DType::kQ8_0, DType::kQ8_0, DType::kQ8_0},
                                                    {DType::kQ4_0, DType::kQ4_0, DType::kQ4_0},
                                                    {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0}};
  for (const auto& types : groups) {
    const DType type = types[0];
    const std::vector<TestMatrix> ws = {test::make_matrix(types[0], kRows, cols, rng),
                                        test::make_matrix(types[1], 16, cols, rng),
                                        test::make_matrix(types[2], 3, cols, rng)};
    for (size_t n : {1, 5}) {
      const std::vector<float> x = test::make_activations(n, cols, rng);
      for (Isa isa : supported_isas()) {
        for (ThreadPool* pool : {&one, &two}) {
          QuantizedActivations xq;
          quantize_activations(x, n, cols, xq, *pool, isa);
          std::vector<std::vector<float>> ys, want;
          std::vector<QuantizedMatmul> group;
          for (const TestMatrix& w : ws) {
            ys.emplace_back(n * w.rows, -1.0f);
            want.emplace_back(n * w.rows);
            matmul_quantized(w.view(), xq, want.back(), *pool, isa);
          }
          std::vector<WeightView> views;
          for (const TestMatrix& w : ws) views.push_back(w.view());
          for (size_t i = 0; i < ws.size(); ++i) group.push_back({.w = &views[i], .y = ys[i]});
          matmul_quantized_group(group, xq, *pool, isa);
          for (size_t i = 0; i < ws.size(); ++i) {
            expect_same_bits(ys[i].data(), want[i].data(), ys[i].size(),
                             describe(type, isa, cols, n) + " matrix " + std::to_string(i) + " threads " +
                                 std::to_string(pool->num_threads()));
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulInvarianceTest,
                         testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                         DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

TEST(MatmulInvarianceTest, ActivationFormDoesNotDependOnTokens) {
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K})
    for (Isa isa : supported_isas())
      for (size_t n : kTokens)
        EXPECT_EQ(matmul_activations(type, n, isa), matmul_activations(type, isa))
            << dtype_name(type) << " " << isa_name(isa) << " tokens " << n;
}

}  // namespace
}  // namespace kvs
