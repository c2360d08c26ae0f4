// Packed Q8_0 weights (tensor/packed_q8.h) and their AVX-512 VNNI matmul: the packing loses nothing, and
// the kernel gives, bit for bit, the canonical sum written out here from the row-major weights, for every
// batch size, thread split and column chunk (so it is batch invariant, like every matmul path).
#include "tensor/packed_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "tensor/act_quant.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace kvs {
namespace {

// Rows: one group, a group plus a partial one (padding rows), many groups.
const std::vector<size_t> kRows = {16, 37, 80};
// Block counts 1, 3 (odd last unit), 64 (exactly one column chunk), 67 and 176 (several chunks).
const std::vector<size_t> kCols = {32, 96, 2048, 2144, 5632};
const std::vector<size_t> kTokens = {1, 2, 3, 8, 9, 17};

// The canonical order of matmul_q8_0x16_avx512.cpp from the GGUF-order blocks: acc = 0, then per block
// acc = fma(float(exact block dot), d_w * d_a, acc).
std::vector<float> canonical_product(const test::TestMatrix& w, const QuantizedActivations& xq) {
  const size_t nb = w.cols / 32;
  std::vector<float> y(xq.n_tokens * w.rows);
  for (size_t t = 0; t < xq.n_tokens; ++t) {
    for (size_t r = 0; r < w.rows; ++r) {
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w.view().row(r));
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        int32_t dot = 0;
        for (size_t j = 0; j < 32; ++j) dot += int32_t{blocks[b].qs[j]} * xq.token_qs(t)[32 * b + j];
        const float scale = fp16_to_fp32(blocks[b].d) * xq.token_scales(t)[b];
        acc = std::fma(static_cast<float>(dot), scale, acc);
      }
      y[t * w.rows + r] = acc;
    }
  }
  return y;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", canonical " << want[i];
      return;
    }
  }
}

std::string describe(size_t rows, size_t cols, size_t n) {
  return "rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " + std::to_string(n);
}

TEST(PackedQ8, UnpacksToTheOriginalBlocks) {
  std::mt19937 rng(5);
  for (size_t rows : {1, 15, 16, 37}) {
    for (size_t cols : {32, 96, 2080}) {
      const test::TestMatrix w = test::make_matrix(DType::kQ8_0, rows, cols, rng);
      const PackedMatrix packed = PackedMatrix::pack_q8_0(w.view());
      EXPECT_EQ(packed.view().layout, WeightLayout::kQ8_0x16);
      EXPECT_EQ(packed.view().bytes(), (PackedQ8Layout{.rows = rows, .cols = cols}.bytes()));
      // No more than the GGUF bytes plus the padding rows and one header half per group.
      const size_t groups = (rows + 15) / 16;
      EXPECT_LE(packed.view().bytes(), groups * 16 * w.view().row_bytes() + groups * 32);
      std::vector<std::byte> row(w.view().row_bytes());
      for (size_t r = 0; r < rows; ++r) {
        unpack_q8_0_row(packed.view(), r, row.data());
        ASSERT_EQ(std::memcmp(row.data(), w.view().row(r), row.size()), 0) << describe(rows, cols, 0) << " row " << r;
      }
    }
  }
}

TEST(PackedQ8, MatmulIsTheCanonicalSumForEveryBatchAndSplit) {
  if (!packed_q8_supported()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  std::mt19937 rng(11);
  ThreadPool one(1), two(2);
  for (size_t rows : kRows) {
    for (size_t cols : kCols) {
      const test::TestMatrix w = test::make_matrix(DType::kQ8_0, rows, cols, rng);
      const PackedMatrix packed = PackedMatrix::pack_q8_0(w.view());
      for (size_t n : kTokens) {
        const std::string what = describe(rows, cols, n);
        const std::vector<float> x = test::make_activations(n, cols, rng);
        QuantizedActivations xq;
        quantize_activations(x, n, cols, xq, one, Isa::kAvx512);
        const std::vector<float> want = canonical_product(w, xq);

        std::vector<float> y(n * rows, -1.0f);
        matmul_quantized(packed.view(), xq, y, one, Isa::kAvx512);
        expect_same_bits(y, want, what + " 1 thread");
        std::fill(y.begin(), y.end(), -1.0f);
        matmul_quantized(packed.view(), xq, y, two, Isa::kAvx512);
        expect_same_bits(y, want, what + " 2 threads");
        std::fill(y.begin(), y.end(), -1.0f);
        matmul(packed.view(), x, n, y, two, Isa::kAvx512);
        expect_same_bits(y, want, what + " matmul");
        // Row ranges on group boundaries, one call each.
        std::fill(y.begin(), y.end(), -1.0f);
        for (size_t r = 0; r < rows; r += 16)
          matmul_rows(packed.view(), x, n, y, r, std::min(rows, r + 32), Isa::kAvx512);
        expect_same_bits(y, want, what + " matmul_rows");
      }
    }
  }
}

TEST(PackedQ8, AgreesWithTheRowMajorKernel) {
  if (!packed_q8_supported()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  std::mt19937 rng(3);
  ThreadPool two(2);
  const size_t rows = 37, cols = 2144, n = 5;
  const test::TestMatrix w = test::make_matrix(DType::kQ8_0, rows, cols, rng);
  const PackedMatrix packed = PackedMatrix::pack_q8_0(w.view());
  const std::vector<float> x = test::make_activations(n, cols, rng);
  QuantizedActivations xq;
  quantize_activations(x, n, cols, xq, two, Isa::kAvx512);
  std::vector<float> y_packed(n * rows), y_rows(n * rows);
  // Both matrices in one group pass, as the model runs Q, K and V.
  const WeightView packed_view = packed.view(), rows_view = w.view();
  const QuantizedMatmul group[] = {{&packed_view, y_packed}, {&rows_view, y_rows}};
  matmul_quantized_group(group, xq, two, Isa::kAvx512);
  const test::ExactProduct exact = test::exact_product(w, x, n);
  for (size_t i = 0; i < y_packed.size(); ++i) {
    // Same exact block dots, fp32 sums in another order: within a few ulps of the magnitude.
    EXPECT_NEAR(y_packed[i], y_rows[i], 1e-5 * exact.abs[i]) << "element " << i;
  }
}

}  // namespace
}  // namespace kvs
