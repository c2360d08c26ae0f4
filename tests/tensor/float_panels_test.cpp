// F16 and BF16 weights in float panels (tensor/float_panels.h) and their matmul kernels: packing loses nothing, and
// every kernel that multiplies widened fp32 values gives, bit for bit, the canonical sum written out here from the
// row-major values (four chains of fma over stripes of 16 columns, combined (0 + 1) + (2 + 3)) for every batch size,
// tile remainder and thread split: batch invariant, and the same bits on AVX2 and AVX-512. The bf16 dot-product path
// is checked against the exact product of bf16-rounded activations within the fp32 accumulation bound, and for batch
// invariance bit for bit.
#include "tensor/float_panels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/cpu_features.h"
#include "tensor/matmul.h"
#include "tensor/matmul_internal.h"
#include "tensor/packed_weights.h"
#include "tensor_test_util.h"

namespace kvs {
namespace {

// Rows: less than a panel, one and a partial (padding rows), several panels with an odd count (a single-panel tile
// after the pairs). Columns: less than a stripe, odd (BF16's pad column), not a whole round of chains, many rounds.
const std::vector<size_t> kRows = {5, 16, 37, 80};
const std::vector<size_t> kCols = {1, 7, 33, 64, 100, 2049};
// Tokens: decode, tiles of AVX2 (6) and AVX-512 (12) with and without a remainder.
const std::vector<size_t> kTokens = {1, 2, 6, 7, 12, 13, 25};

std::string describe(DType type, WeightLayout layout, Isa isa, size_t rows, size_t cols, size_t n) {
  return std::string(dtype_name(type)) + " " + weight_layout_name(layout) + " on " + std::string(isa_name(isa)) +
         ": rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " + std::to_string(n);
}

// The canonical sum of float_panels.h, from the specification: chain k takes the columns with (c / 16) % 4 == k,
// each one fma after another from +0; y = (chain 0 + chain 1) + (chain 2 + chain 3).
float canonical_sum(const float* w, const float* x, size_t cols) {
  float chain[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (size_t c = 0; c < cols; ++c) chain[c / 16 % 4] = std::fma(w[c], x[c], chain[c / 16 % 4]);
  return (chain[0] + chain[1]) + (chain[2] + chain[3]);
}

// x rounded to the nearest bf16, ties to even (finite values).
float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

struct PanelCase {
  WeightLayout layout;
  Isa isa;
};

// The panel layouts this CPU runs, each with the ISA whose kernel reads it.
std::vector<PanelCase> runnable_cases() {
  std::vector<PanelCase> out;
  if (isa_supported(Isa::kAvx512)) out.push_back({packed_weight_layout(16), Isa::kAvx512});
  if (isa_supported(Isa::kAvx2)) out.push_back({packed_weight_layout(8), Isa::kAvx2});
  return out;
}

TEST(FloatPanels, UnpackToTheOriginalRows) {
  std::mt19937 rng(3);
  ThreadPool two(2);
  for (DType type : {DType::kF16, DType::kBF16}) {
    for (WeightLayout layout : {WeightLayout::kPackedX16, WeightLayout::kPackedX8}) {
      for (size_t rows : kRows) {
        for (size_t cols : kCols) {
          const test::TestMatrix w = test::make_matrix(type, rows, cols, rng);
          const PackedMatrix packed = PackedMatrix::pack(w.view(), layout);
          const FloatPanelLayout p = FloatPanelLayout::of(packed.view());
          const std::string what = describe(type, layout, Isa::kScalar, rows, cols, 0);
          // The file's bytes plus the padding rows (and BF16's pad column); every panel starts on a boundary of the
          // kernels' aligned loads (a column of G halfwords, a BF16 pair of columns).
          EXPECT_EQ(packed.view().bytes(), p.groups() * p.group_rows * p.stored_cols() * 2) << what;
          EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.view().data) % 64, 0u);
          EXPECT_EQ(p.group_bytes() % (p.group_rows * (type == DType::kBF16 ? 4 : 2)), 0u) << what;
          const PackedMatrix parallel = PackedMatrix::pack(w.view(), layout, &two);
          EXPECT_EQ(std::memcmp(parallel.view().data, packed.view().data, p.bytes()), 0) << what << " on two threads";
          std::vector<std::byte> row(w.view().row_bytes());
          for (size_t r = 0; r < rows; ++r) {
            unpack_row(packed.view(), r, row.data());
            ASSERT_EQ(std::memcmp(row.data(), w.view().row(r), row.size()), 0) << what << " row " << r;
          }
          // Padding rows and the pad column are zeros (they add +0 products, never values of another row).
          const auto* half = reinterpret_cast<const uint16_t*>(packed.view().data);
          for (size_t g = 0; g < p.groups(); ++g) {
            for (size_t i = 0; i < p.group_rows; ++i) {
              for (size_t c = 0; c < p.stored_cols(); ++c) {
                if (g * p.group_rows + i < rows && c < cols) continue;
                ASSERT_EQ(half[g * p.group_bytes() / 2 + p.element(i, c)], 0u) << what << " pad " << i << ", " << c;
              }
            }
          }
        }
      }
    }
  }
}

TEST(FloatPanels, LayoutForEachIsa) {
  for (DType type : {DType::kF16, DType::kBF16}) {
    EXPECT_FALSE(packed_layout_for(type, Isa::kScalar));
    if (isa_supported(Isa::kAvx2)) {
      EXPECT_EQ(packed_layout_for(type, Isa::kAvx2), WeightLayout::kPackedX8);
    }
    if (isa_supported(Isa::kAvx512)) {
      EXPECT_EQ(packed_layout_for(type, Isa::kAvx512), WeightLayout::kPackedX16);
    }
  }
  EXPECT_FALSE(packed_layout_for(DType::kF32, best_isa()));  // F32 stays row-major
}

// Every widened-fp32 kernel (F16 everywhere; BF16 where the CPU has no bf16 dot products or the ISA is AVX2) equals
// the canonical sum bit for bit, decode and prefill, on one and two threads and row by row ranges.
TEST(FloatPanels, WidenedKernelsGiveTheCanonicalSumForEveryBatchAndSplit) {
  const std::vector<PanelCase> cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "no panel kernel runs within this ISA limit";
  std::mt19937 rng(11);
  ThreadPool one(1), two(2);
  size_t compared = 0;
  for (const PanelCase& pc : cases) {
    for (DType type : {DType::kF16, DType::kBF16}) {
      if (matmul_activations(type, pc.isa) != MatmulActivations::kF32) continue;
      for (size_t rows : kRows) {
        for (size_t cols : kCols) {
          const test::TestMatrix w = test::make_matrix(type, rows, cols, rng);
          const PackedMatrix packed = PackedMatrix::pack(w.view(), pc.layout);
          for (size_t n : kTokens) {
            const std::vector<float> x = test::make_activations(n, cols, rng);
            const std::string what = describe(type, pc.layout, pc.isa, rows, cols, n);
            std::vector<float> expected(n * rows);
            for (size_t t = 0; t < n; ++t)
              for (size_t r = 0; r < rows; ++r)
                expected[t * rows + r] = canonical_sum(&w.values[r * cols], &x[t * cols], cols);
            for (ThreadPool* pool : {&one, &two}) {
              const size_t threads = pool == &one ? 1 : 2;
              std::vector<float> y(n * rows, NAN);
              matmul(packed.view(), x, n, y, *pool, pc.isa);
              ASSERT_EQ(std::memcmp(y.data(), expected.data(), y.size() * 4), 0) << what << " threads " << threads;
            }
            // Ranges of whole panels, as the thread pool cuts them, the last one ragged.
            const size_t g = FloatPanelLayout::of(packed.view()).group_rows;
            std::vector<float> y(n * rows, NAN);
            for (size_t r = 0; r < rows; r += 2 * g)
              matmul_rows(packed.view(), x, n, y, r, std::min(rows, r + 2 * g), pc.isa);
            ASSERT_EQ(std::memcmp(y.data(), expected.data(), y.size() * 4), 0) << what << " by row ranges";
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 0u);
}

// The AVX-512 kernel that widens BF16 pairs runs where the CPU lacks AVX512_BF16; matmul() takes the dot products
// here when the CPU has them, so the kernel is called directly: the canonical sum bit for bit, like the AVX2 one.
TEST(FloatPanels, Avx512WidenedBf16KernelGivesTheCanonicalSum) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "avx512 is outside this ISA limit";
  std::mt19937 rng(23);
  for (size_t rows : kRows) {
    for (size_t cols : kCols) {
      const test::TestMatrix w = test::make_matrix(DType::kBF16, rows, cols, rng);
      const PackedMatrix packed = PackedMatrix::pack(w.view(), WeightLayout::kPackedX16);
      for (size_t n : kTokens) {
        const std::vector<float> x = test::make_activations(n, cols, rng);
        AlignedBuffer<float> tiles;
        tile_activations(x.data(), n, cols, tiles);
        std::vector<float> y(n * rows, NAN);
        const detail::MatmulOperands op{
            .w = packed.view(), .n_tokens = n, .x = x.data(), .x_tiles = tiles.data(), .y = y.data()};
        detail::matmul_bf16_panels_avx512(op, 0, rows);
        for (size_t t = 0; t < n; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            const float want = canonical_sum(&w.values[r * cols], &x[t * cols], cols);
            ASSERT_EQ(std::memcmp(&y[t * rows + r], &want, 4), 0)
                << describe(DType::kBF16, WeightLayout::kPackedX16, Isa::kAvx512, rows, cols, n) << " row " << r
                << " token " << t;
          }
        }
      }
    }
  }
}

// BF16 on the bf16 dot-product path (AVX512_BF16): within the fp32 accumulation bound of the exact product of the
// bf16-rounded activations, and every token's output the same bits whatever the batch.
TEST(FloatPanels, Bf16DotProductsStayWithinTheirBoundAndAreBatchInvariant) {
  if (!isa_supported(Isa::kAvx512) || matmul_activations(DType::kBF16, Isa::kAvx512) != MatmulActivations::kBf16)
    GTEST_SKIP() << "the bf16 dot-product path needs avx512 with AVX512_BF16";
  std::mt19937 rng(17);
  ThreadPool two(2);
  for (size_t rows : kRows) {
    for (size_t cols : kCols) {
      const test::TestMatrix w = test::make_matrix(DType::kBF16, rows, cols, rng);
      const PackedMatrix packed = PackedMatrix::pack(w.view(), WeightLayout::kPackedX16);
      const size_t n = 25;
      const std::vector<float> x = test::make_activations(n, cols, rng);
      std::vector<float> xr(x.size());
      for (size_t i = 0; i < x.size(); ++i) xr[i] = round_to_bf16(x[i]);
      std::vector<float> y(n * rows);
      matmul(packed.view(), x, n, y, two, Isa::kAvx512);
      for (size_t t = 0; t < n; ++t) {
        std::vector<float> one_token(rows);
        matmul(packed.view(), std::span<const float>(x).subspan(t * cols, cols), 1, one_token, two, Isa::kAvx512);
        ASSERT_EQ(std::memcmp(one_token.data(), &y[t * rows], rows * 4), 0)
            << describe(DType::kBF16, WeightLayout::kPackedX16, Isa::kAvx512, rows, cols, n) << " token " << t;
        for (size_t r = 0; r < rows; ++r) {
          double exact = 0.0, abs = 0.0;
          for (size_t c = 0; c < cols; ++c) {
            const double v = static_cast<double>(w.values[r * cols + c]) * xr[t * cols + c];
            exact += v;
            abs += std::fabs(v);
          }
          // A chain adds at most cols / 4 + 16 rounded terms, then two levels combine the chains: each step rounds
          // once (products of bf16 values are exact in fp32).
          const double bound = (cols / 4.0 + 18.0) * std::ldexp(1.0, -24) * abs;
          ASSERT_NEAR(y[t * rows + r], exact, bound) << "row " << r << " token " << t << " cols " << cols;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs
