// Every matmul path against the exact (fp64) product, within the tolerance its activation form allows
// (see MatmulActivations), on shapes that exercise every tile remainder and column tail.
#include "tensor/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tensor/act_quant.h"
#include "tensor/cpu_features.h"
#include "tensor_test_util.h"

namespace kvs {
namespace {

using test::ExactProduct;
using test::TestMatrix;

// Tolerances, relative to sum_c |w_c x_c| of each output:
constexpr double kF32Tol = 1e-5;            // reordered fp32 sums (measured errors are ~1e-7)
constexpr double kBf16Tol = 0x1p-8 + 1e-5;  // x rounded to bf16: relative error <= 2^-8 per value
// Int8 blocks: sum_c |w_c| * d_block / 2 (x's quantization error) + kF32Tol; and against the portable
// integer reference (same quantized inputs) only reordered fp32 sums:
constexpr double kInt8VsIntegerRefTol = 1e-5;

const std::vector<size_t> kRows = {1, 5, 17, 67, 130};
const std::vector<size_t> kTokens = {1, 2, 3, 7, 17, 64};
const std::vector<size_t> kFloatCols = {1, 7, 33, 64, 96, 1000, 4096 + 32};
const std::vector<size_t> kQuantCols = {32, 64, 96, 2048 + 32, 4096 + 32};
const std::vector<size_t> kKQuantCols = {256, 768, 2048 + 256};  // whole super-blocks

bool is_quant(DType t) { return is_block_quantized(t); }
const std::vector<size_t>& cols_for(DType t) {
  return is_k_quant(t) ? kKQuantCols : is_quant(t) ? kQuantCols : kFloatCols;
}

// |x - d q| <= d / 2 per value: bound[t][r] = sum_c |w[r][c]| * d(t, c / 32) / 2.
std::vector<double> quantization_bound(const TestMatrix& w, const QuantizedActivations& xq) {
  std::vector<double> bound(xq.n_tokens * w.rows);
  for (size_t t = 0; t < xq.n_tokens; ++t)
    for (size_t r = 0; r < w.rows; ++r) {
      double b = 0.0;
      for (size_t c = 0; c < w.cols; ++c)
        b += std::fabs(w.values[r * w.cols + c]) * xq.token_scales(t)[c / 32] * 0.5001;
      bound[t * w.rows + r] = b;
    }
  return bound;
}

// Checks every output against exact.y within allowed[i]; reports the first few misses.
void expect_within(const std::vector<float>& y, const ExactProduct& exact, const std::vector<double>& allowed,
                   const std::string& what) {
  int misses = 0;
  for (size_t i = 0; i < exact.y.size() && misses < 5; ++i) {
    const double err = std::fabs(y[i] - exact.y[i]);
    if (!(err <= allowed[i])) {
      ADD_FAILURE() << what << " output " << i << ": got " << y[i] << ", exact " << exact.y[i] << ", error " << err
                    << " > allowed " << allowed[i] << " (sum|wx| = " << exact.abs[i] << ")";
      ++misses;
    }
  }
}

std::vector<double> relative(const ExactProduct& exact, double tol) {
  std::vector<double> out(exact.abs.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = tol * exact.abs[i] + 1e-30;
  return out;
}

void check_shape(DType type, size_t rows, size_t cols, size_t n, std::mt19937& rng, ThreadPool& pool) {
  const TestMatrix w = test::make_matrix(type, rows, cols, rng);
  const std::vector<float> x = test::make_activations(n, cols, rng);
  const ExactProduct exact = test::exact_product(w, x, n);
  for (Isa isa : supported_isas()) {
    const std::string what = std::string(dtype_name(type)) + " " + std::string(isa_name(isa)) + " rows " +
                             std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " + std::to_string(n);
    std::vector<float> y(n * rows, -1.0f);
    matmul(w.view(), x, n, y, pool, isa);
    switch (matmul_activations(type, n, isa)) {
      case MatmulActivations::kF32: expect_within(y, exact, relative(exact, kF32Tol), what); break;
      case MatmulActivations::kBf16: expect_within(y, exact, relative(exact, kBf16Tol), what); break;
      case MatmulActivations::kInt8Blocks: {
        QuantizedActivations xq;
        quantize_activations(x, n, cols, xq, pool, Isa::kScalar);
        std::vector<double> allowed = relative(exact, kF32Tol);
        const std::vector<double> qbound = quantization_bound(w, xq);
        for (size_t i = 0; i < allowed.size(); ++i) allowed[i] += qbound[i];
        expect_within(y, exact, allowed, what);
        // The same quantized inputs through the portable integer reference.
        std::vector<float> y_ref(n * rows);
        matmul_quantized(w.view(), xq, y_ref, pool, Isa::kScalar);
        ExactProduct ref{std::vector<double>(y_ref.begin(), y_ref.end()), exact.abs};
        expect_within(y, ref, relative(exact, kInt8VsIntegerRefTol), what + " vs integer reference");
        break;
      }
    }
  }
}

class MatmulTest : public testing::TestWithParam<DType> {};

TEST_P(MatmulTest, EveryIsaMatchesExactProductOnOddShapes) {
  const DType type = GetParam();
  std::mt19937 rng(1234 + static_cast<int>(type));
  ThreadPool pool(1);
  for (size_t rows : kRows)
    for (size_t cols : cols_for(type))
      for (size_t n : kTokens) check_shape(type, rows, cols, n, rng, pool);
}

TEST_P(MatmulTest, TwoThreadsGiveTheSameBitsAsOne) {
  const DType type = GetParam();
  std::mt19937 rng(99);
  ThreadPool one(1), two(2);
  for (size_t rows : {67, 130})
    for (size_t n : {1, 5, 64}) {
      const size_t cols = is_k_quant(type) ? 2048 + 256 : is_quant(type) ? 2048 + 32 : 1000;
      const TestMatrix w = test::make_matrix(type, rows, cols, rng);
      const std::vector<float> x = test::make_activations(n, cols, rng);
      for (Isa isa : supported_isas()) {
        std::vector<float> y1(n * rows), y2(n * rows);
        matmul(w.view(), x, n, y1, one, isa);
        matmul(w.view(), x, n, y2, two, isa);
        EXPECT_EQ(y1, y2) << dtype_name(type) << " " << isa_name(isa) << " rows " << rows << " tokens " << n;
      }
    }
}

TEST_P(MatmulTest, RowRangesAndReusedScratchAgreeWithWholeMatmul) {
  const DType type = GetParam();
  std::mt19937 rng(7);
  ThreadPool pool(1);
  MatmulScratch scratch;
  for (size_t n : {17, 1}) {  // the scratch shrinks on the second round
    const size_t rows = 37, cols = is_k_quant(type) ? 512 : 96;
    const TestMatrix w = test::make_matrix(type, rows, cols, rng);
    const std::vector<float> x = test::make_activations(n, cols, rng);
    for (Isa isa : supported_isas()) {
      std::vector<float> whole(n * rows), reused(n * rows), parts(n * rows);
      matmul(w.view(), x, n, whole, pool, isa);
      matmul(w.view(), x, n, reused, pool, scratch, isa);
      for (size_t r = 0; r < rows; r += 16) matmul_rows(w.view(), x, n, parts, r, std::min(rows, r + 16), isa);
      EXPECT_EQ(whole, reused) << isa_name(isa);
      EXPECT_EQ(whole, parts) << isa_name(isa);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest,
                         testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                         DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

TEST(MatmulQuantizedTest, OneQuantizationFeedsSeveralMatrices) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const size_t n = 9, cols = 256;
  const std::vector<float> x = test::make_activations(n, cols, rng);
  QuantizedActivations xq;
  quantize_activations(x, n, cols, xq, pool);
  size_t compared = 0;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    // Only where matmul itself quantizes x (SIMD paths); the scalar path multiplies by fp32 x instead.
    if (matmul_activations(type, n, best_isa()) != MatmulActivations::kInt8Blocks) continue;
    const TestMatrix w = test::make_matrix(type, 40, cols, rng);
    std::vector<float> direct(n * 40), pre(n * 40);
    matmul(w.view(), x, n, direct, pool);
    matmul_quantized(w.view(), xq, pre, pool);
    EXPECT_EQ(direct, pre) << dtype_name(type);
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "matmul takes fp32 activations on the " << isa_name(best_isa()) << " path";
}

TEST(MatmulActivationsTest, FormsPerTypeAndIsa) {
  EXPECT_EQ(matmul_activations(DType::kQ8_0, 1, Isa::kScalar), MatmulActivations::kF32);
  EXPECT_EQ(matmul_activations(DType::kF16, 64, Isa::kAvx2), MatmulActivations::kF32);
  EXPECT_EQ(matmul_activations(DType::kQ4_0, 1, Isa::kAvx2), MatmulActivations::kInt8Blocks);
  // BF16 weights: the bf16 dot product wherever the CPU has it, decode included (one form for every n).
  if (isa_supported(Isa::kAvx512)) {
    EXPECT_EQ(matmul_activations(DType::kBF16, 1, Isa::kAvx512),
              cpu_has_avx512_bf16() ? MatmulActivations::kBf16 : MatmulActivations::kF32);
  }
  EXPECT_EQ(matmul_activations(DType::kBF16, 1, Isa::kAvx2), MatmulActivations::kF32);
}

}  // namespace
}  // namespace kvs
