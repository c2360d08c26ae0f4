// Packed Q8_0 / Q4_0 weights (tensor/packed_weights.h) and their matmul kernels (AVX-512 VNNI on groups of
// 16 rows; AVX2 and AVX-VNNI on groups of 8): the packing loses nothing, and every kernel gives, bit for bit,
// the canonical sum written out here from the row-major weights, for every batch size, thread split and
// column chunk (so it is batch invariant, like every matmul path, and the same on every ISA).
#include "tensor/packed_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "tensor/act_quant.h"
#include "tensor/cpu_features.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace kvs {
namespace {

// Rows: one group, a group plus a partial one (padding rows), many groups.
const std::vector<size_t> kRows = {16, 37, 80};
// Block counts 1, 3 (odd last unit), 64 (exactly one column chunk), 67 and 176 (several chunks).
const std::vector<size_t> kCols = {32, 96, 2048, 2144, 5632};
const std::vector<size_t> kTokens = {1, 2, 3, 4, 8, 9, 17};

struct PackedCase {
  WeightLayout layout;
  Isa isa;  // the kernel that runs it
};

// Every packed layout with every ISA that runs a kernel for it on this CPU.
std::vector<PackedCase> runnable_cases() {
  std::vector<PackedCase> out;
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    if (isa_supported(Isa::kAvx512) && cpu_has_avx512_vnni())
      out.push_back({packed_weight_layout(type, 16), Isa::kAvx512});
    for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni})
      if (isa_supported(isa)) out.push_back({packed_weight_layout(type, 8), isa});
  }
  return out;
}

DType layout_type(WeightLayout layout) {
  return layout == WeightLayout::kQ8_0x16 || layout == WeightLayout::kQ8_0x8 ? DType::kQ8_0 : DType::kQ4_0;
}

// The block's values as signed integers (Q4_0: the 4-bit value - 8) and its fp16 scale.
void block_values(const test::TestMatrix& w, size_t r, size_t b, int32_t (&q)[32], float& d) {
  if (w.type == DType::kQ8_0) {
    const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(w.view().row(r))[b];
    for (size_t j = 0; j < 32; ++j) q[j] = blk.qs[j];
    d = fp16_to_fp32(blk.d);
  } else {
    const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(w.view().row(r))[b];
    for (size_t j = 0; j < 16; ++j) {
      q[j] = (blk.qs[j] & 0x0f) - 8;
      q[j + 16] = (blk.qs[j] >> 4) - 8;
    }
    d = fp16_to_fp32(blk.d);
  }
}

// The canonical order of packed_matmul_impl.h from the GGUF-order blocks: acc = 0, then per block
// acc = fma(float(exact block dot), d_w * d_a, acc).
std::vector<float> canonical_product(const test::TestMatrix& w, const QuantizedActivations& xq) {
  const size_t nb = w.cols / 32;
  std::vector<float> y(xq.n_tokens * w.rows);
  for (size_t t = 0; t < xq.n_tokens; ++t) {
    for (size_t r = 0; r < w.rows; ++r) {
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        int32_t q[32];
        float d = 0.0f;
        block_values(w, r, b, q, d);
        int32_t dot = 0;
        for (size_t j = 0; j < 32; ++j) dot += q[j] * xq.token_qs(t)[32 * b + j];
        acc = std::fma(static_cast<float>(dot), d * xq.token_scales(t)[b], acc);
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

std::string describe(WeightLayout layout, Isa isa, size_t rows, size_t cols, size_t n) {
  return std::string(weight_layout_name(layout)) + " on " + std::string(isa_name(isa)) + ": rows " +
         std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " + std::to_string(n);
}

TEST(PackedWeights, UnpackToTheOriginalBlocks) {
  std::mt19937 rng(5);
  for (WeightLayout layout :
       {WeightLayout::kQ8_0x16, WeightLayout::kQ8_0x8, WeightLayout::kQ4_0x16, WeightLayout::kQ4_0x8}) {
    const DType type = layout_type(layout);
    for (size_t rows : {1, 7, 8, 15, 16, 37}) {
      for (size_t cols : {32, 96, 2080}) {
        const test::TestMatrix w = test::make_matrix(type, rows, cols, rng);
        const PackedMatrix packed = PackedMatrix::pack(w.view(), layout);
        const PackedLayout p = PackedLayout::of(packed.view());
        EXPECT_EQ(packed.view().layout, layout);
        EXPECT_EQ(packed.view().bytes(), p.bytes());
        // No more than the GGUF bytes plus the padding rows and one header half per group.
        const size_t g = p.group_rows, groups = (rows + g - 1) / g;
        EXPECT_LE(packed.view().bytes(), groups * g * w.view().row_bytes() + groups * 2 * g);
        // Aligned units: every vector load of the kernels is aligned.
        EXPECT_EQ(p.unit_bytes() % (4 * g), 0u);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.view().data) % 64, 0u);
        std::vector<std::byte> row(w.view().row_bytes());
        for (size_t r = 0; r < rows; ++r) {
          unpack_row(packed.view(), r, row.data());
          ASSERT_EQ(std::memcmp(row.data(), w.view().row(r), row.size()), 0)
              << describe(layout, Isa::kScalar, rows, cols, 0) << " row " << r;
        }
      }
    }
  }
}

TEST(PackedWeights, LayoutForEachIsa) {
  for (DType type : {DType::kF16, DType::kQ4_K}) EXPECT_FALSE(packed_layout_for(type, best_isa()));
  EXPECT_FALSE(packed_layout_for(DType::kQ8_0, Isa::kScalar));
  if (isa_supported(Isa::kAvx2)) {
    EXPECT_EQ(packed_layout_for(DType::kQ8_0, Isa::kAvx2), WeightLayout::kQ8_0x8);
    EXPECT_EQ(packed_layout_for(DType::kQ4_0, Isa::kAvx2), WeightLayout::kQ4_0x8);
  }
  if (isa_supported(Isa::kAvx512) && cpu_has_avx512_vnni()) {
    EXPECT_EQ(packed_layout_for(DType::kQ8_0, Isa::kAvx512), WeightLayout::kQ8_0x16);
    EXPECT_EQ(packed_layout_for(DType::kQ4_0, Isa::kAvx512), WeightLayout::kQ4_0x16);
  }
}

TEST(PackedWeights, MatmulIsTheCanonicalSumForEveryBatchSplitAndIsa) {
  const std::vector<PackedCase> cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "no packed kernel runs within this ISA limit";
  std::mt19937 rng(11);
  ThreadPool one(1), two(2);
  for (const PackedCase& c : cases) {
    for (size_t rows : kRows) {
      for (size_t cols : kCols) {
        const test::TestMatrix w = test::make_matrix(layout_type(c.layout), rows, cols, rng);
        const PackedMatrix packed = PackedMatrix::pack(w.view(), c.layout);
        const size_t g = PackedLayout::of(packed.view()).group_rows;
        for (size_t n : kTokens) {
          const std::string what = describe(c.layout, c.isa, rows, cols, n);
          const std::vector<float> x = test::make_activations(n, cols, rng);
          QuantizedActivations xq;
          quantize_activations(x, n, cols, xq, one, c.isa);
          const std::vector<float> want = canonical_product(w, xq);

          std::vector<float> y(n * rows, -1.0f);
          matmul_quantized(packed.view(), xq, y, one, c.isa);
          expect_same_bits(y, want, what + " 1 thread");
          std::fill(y.begin(), y.end(), -1.0f);
          matmul_quantized(packed.view(), xq, y, two, c.isa);
          expect_same_bits(y, want, what + " 2 threads");
          std::fill(y.begin(), y.end(), -1.0f);
          matmul(packed.view(), x, n, y, two, c.isa);
          expect_same_bits(y, want, what + " matmul");
          // Row ranges on group boundaries, one call each.
          std::fill(y.begin(), y.end(), -1.0f);
          for (size_t r = 0; r < rows; r += g) matmul_rows(packed.view(), x, n, y, r, std::min(rows, r + g), c.isa);
          expect_same_bits(y, want, what + " matmul_rows");
        }
      }
    }
  }
}

TEST(PackedWeights, AgreeWithTheRowMajorKernel) {
  const std::vector<PackedCase> cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "no packed kernel runs within this ISA limit";
  std::mt19937 rng(3);
  ThreadPool two(2);
  for (const PackedCase& c : cases) {
    for (auto [rows, cols, n] :
         {std::tuple<size_t, size_t, size_t>{37, 2144, 5}, {500, 96, 1}, {96, 160, 6}, {32, 96, 1}}) {
      const test::TestMatrix w = test::make_matrix(layout_type(c.layout), rows, cols, rng);
      const PackedMatrix packed = PackedMatrix::pack(w.view(), c.layout);
      const std::vector<float> x = test::make_activations(n, cols, rng);
      QuantizedActivations xq;
      quantize_activations(x, n, cols, xq, two, c.isa);
      std::vector<float> y_packed(n * rows), y_rows(n * rows);
      // Both matrices in one group pass, as the model runs Q, K and V.
      const WeightView packed_view = packed.view(), rows_view = w.view();
      const QuantizedMatmul group[] = {{&packed_view, y_packed}, {&rows_view, y_rows}};
      matmul_quantized_group(group, xq, two, c.isa);
      const test::ExactProduct exact = test::exact_product(w, x, n);
      for (size_t i = 0; i < y_packed.size(); ++i) {
        // Same exact block dots, fp32 sums in another order: within a few ulps of the magnitude.
        EXPECT_NEAR(y_packed[i], y_rows[i], 1e-5 * exact.abs[i])
            << describe(c.layout, c.isa, rows, cols, n) << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kvs
