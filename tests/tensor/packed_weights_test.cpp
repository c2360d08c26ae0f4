// Packed block-quantized weights (tensor/packed_weights.h) and their matmul kernels (AVX-512 VNNI on
// groups of 16 rows; AVX2 and AVX-VNNI on groups of 8): the packing loses nothing, and every kernel gives, bit for bit,
// the canonical sum written out here from the row-major weights, for every batch size, thread split and column chunk
// (so it is batch invariant, like every matmul path, and the same on every ISA).
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
#include "tensor/kquant.h"
#include "tensor/legacy_iq4_quant.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace kvs {
namespace {

// Rows: one group, a group plus a partial one (padding rows), many groups.
const std::vector<size_t> kRows = {16, 37, 80};
// Block counts 1, 3 (odd last unit), 64 (exactly one column chunk), 67 and 176 (several chunks); Q4_K:
// super-block counts 1, 3, 8 (one chunk), 9 and 22.
const std::vector<size_t> kCols = {32, 96, 2048, 2144, 5632};
const std::vector<size_t> kKQuantCols = {256, 768, 2048, 2304, 5632};
const std::vector<size_t> kTokens = {1, 2, 3, 4, 8, 9, 17};

// Every packable type.
const DType kPackedTypes[] = {DType::kQ8_0,   DType::kQ4_0,   DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                              DType::kIQ4_NL, DType::kIQ4_XS, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

struct PackedCase {
  DType type;
  WeightLayout layout;
  Isa isa;  // the kernel that runs it
};

// Every packable type in every packed layout with every ISA that runs a kernel for it on this CPU.
std::vector<PackedCase> runnable_cases() {
  std::vector<PackedCase> out;
  for (DType type : kPackedTypes) {
    if (isa_supported(Isa::kAvx512) && cpu_has_avx512_vnni())
      out.push_back({type, packed_weight_layout(16), Isa::kAvx512});
    for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni})
      if (isa_supported(isa)) out.push_back({type, packed_weight_layout(8), isa});
  }
  return out;
}

// Units of a super-block: K-quants and IQ4_XS.
bool super_blocks(DType type) {
  return type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K || type == DType::kIQ4_XS;
}
bool k_with_mins(DType type) { return type == DType::kQ4_K || type == DType::kQ5_K; }
const std::vector<size_t>& cols_for(DType type) { return super_blocks(type) ? kKQuantCols : kCols; }

// The 32-value block's values as d q + m with q an integer (Q4_0: the 4-bit value - 8; the others from
// block_ints32, checked against ggml's byte layouts in legacy_iq4_quant_test.cpp).
BlockInts32 block_values(const test::TestMatrix& w, size_t r, size_t b) {
  BlockInts32 out;
  if (w.type == DType::kQ8_0) {
    const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(w.view().row(r))[b];
    for (size_t j = 0; j < 32; ++j) out.q[j] = blk.qs[j];
    out.d = fp16_to_fp32(blk.d);
  } else if (w.type == DType::kQ4_0) {
    const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(w.view().row(r))[b];
    for (size_t j = 0; j < 16; ++j) {
      out.q[j] = static_cast<int8_t>((blk.qs[j] & 0x0f) - 8);
      out.q[j + 16] = static_cast<int8_t>((blk.qs[j] >> 4) - 8);
    }
    out.d = fp16_to_fp32(blk.d);
  } else {
    out = block_ints32(w.type, w.view().row(r), b);
  }
  return out;
}

// IQ4_XS in the canonical order of packed_matmul_impl.h: per super-block sb = sum_j fma(float(dot_j),
// float(ls_j - 32) d_a(j)), acc = fma(d, sb, acc).
float canonical_iq4_xs(const test::TestMatrix& w, const QuantizedActivations& xq, size_t r, size_t t) {
  const int8_t* a = xq.token_qs(t);
  const float* da = xq.token_scales(t);
  float acc = 0.0f;
  for (size_t s = 0; s < w.cols / kSuperBlock; ++s) {
    const Iq4XsLevels blk = read_iq4_xs_levels(w.view().row(r) + s * sizeof(BlockIQ4_XS));
    float sb = 0.0f;
    for (size_t j = 0; j < 8; ++j) {
      const size_t b = 8 * s + j;
      int32_t dot = 0;
      for (size_t c = 0; c < 32; ++c) dot += kIq4Grid[blk.levels[32 * j + c]] * a[32 * b + c];
      sb = std::fma(static_cast<float>(dot), static_cast<float>(blk.scales[j]) * da[b], sb);
    }
    acc = std::fma(fp16_to_fp32(blk.d), sb, acc);
  }
  return acc;
}

// Q4_K and Q5_K in the canonical order of packed_matmul_impl.h, from the file's super-blocks decoded by the
// format's own decoder (decode_k_block): per super-block sb = sum_j fma(float(dot_j), float(sc_j) d_a(j)),
// mb = sum_j fma(float(m_j), d_a(j) float(sum_j(a))), acc = fma(-dmin, mb, fma(d, sb, acc)); the activation sums
// counted here from the int8 values.
float canonical_k_with_mins(const test::TestMatrix& w, const QuantizedActivations& xq, size_t r, size_t t) {
  const int8_t* a = xq.token_qs(t);
  const float* da = xq.token_scales(t);
  float acc = 0.0f;
  for (size_t s = 0; s < w.cols / kSuperBlock; ++s) {
    const KBlockInts blk = decode_k_block(w.type, w.view().row(r) + s * dtype_block_bytes(w.type));
    float sb = 0.0f, mb = 0.0f;
    for (size_t j = 0; j < 8; ++j) {
      const size_t b = 8 * s + j;
      int32_t dot = 0, sum = 0;
      for (size_t c = 0; c < 32; ++c) {
        dot += blk.q[32 * j + c] * a[32 * b + c];
        sum += a[32 * b + c];
      }
      sb = std::fma(static_cast<float>(dot), static_cast<float>(blk.scale[2 * j]) * da[b], sb);
      mb = std::fma(static_cast<float>(blk.min[2 * j]), da[b] * static_cast<float>(sum), mb);
    }
    acc = std::fma(blk.d, sb, acc);
    acc = std::fma(-blk.dmin, mb, acc);
  }
  return acc;
}

// Q4_K, Q5_K: sum over the row of (|d sc q| + |dmin m|) |x|, the magnitude of the two parts the kernels add up.
double k_parts_magnitude(const test::TestMatrix& w, const std::vector<float>& x, size_t r, size_t t) {
  double sum = 0.0;
  for (size_t s = 0; s < w.cols / kSuperBlock; ++s) {
    const KBlockInts blk = decode_k_block(w.type, w.view().row(r) + s * dtype_block_bytes(w.type));
    for (size_t e = 0; e < kSuperBlock; ++e) {
      const double part =
          std::fabs(blk.d * blk.scale[e / 16] * blk.q[e]) + std::fabs(static_cast<double>(blk.dmin) * blk.min[e / 16]);
      sum += part * std::fabs(x[t * w.cols + s * kSuperBlock + e]);
    }
  }
  return sum;
}

// Q4_1, Q5_1: sum over the row of (|d q| + |m|) |x|.
double block_parts_magnitude(const test::TestMatrix& w, const std::vector<float>& x, size_t r, size_t t) {
  double sum = 0.0;
  for (size_t b = 0; b < w.cols / 32; ++b) {
    const BlockInts32 blk = block_values(w, r, b);
    for (size_t j = 0; j < 32; ++j)
      sum +=
          (std::fabs(static_cast<double>(blk.d) * blk.q[j]) + std::fabs(blk.m)) * std::fabs(x[t * w.cols + 32 * b + j]);
  }
  return sum;
}

// Q6_K in the canonical order of packed_matmul_impl.h, from the file's super-blocks decoded by the format's
// own decoder (decode_k_block: q - 32): per super-block sb = sum_g fma(float(dot_g), float(sc_g) d_a(g / 2)),
// acc = fma(d, sb, acc).
float canonical_q6_k(const test::TestMatrix& w, const QuantizedActivations& xq, size_t r, size_t t) {
  const int8_t* a = xq.token_qs(t);
  const float* da = xq.token_scales(t);
  float acc = 0.0f;
  for (size_t s = 0; s < w.cols / kSuperBlock; ++s) {
    const KBlockInts blk = decode_k_block(DType::kQ6_K, w.view().row(r) + s * sizeof(BlockQ6_K));
    float sb = 0.0f;
    for (size_t g = 0; g < 16; ++g) {
      const size_t b = 8 * s + g / 2;
      int32_t dot = 0;
      for (size_t c = 0; c < 16; ++c) dot += blk.q[16 * g + c] * a[kSuperBlock * s + 16 * g + c];
      sb = std::fma(static_cast<float>(dot), static_cast<float>(blk.scale[g]) * da[b], sb);
    }
    acc = std::fma(blk.d, sb, acc);
  }
  return acc;
}

// The canonical order of packed_matmul_impl.h from the GGUF-order blocks: the 32-value types: acc = 0, then per
// block acc = fma(float(exact block dot), d_w * d_a, acc) and, with a min, acc = fma(m_w, d_a float(sum(a)), acc);
// the super-block types above.
std::vector<float> canonical_product(const test::TestMatrix& w, const QuantizedActivations& xq) {
  if (super_blocks(w.type)) {
    std::vector<float> y(xq.n_tokens * w.rows);
    for (size_t t = 0; t < xq.n_tokens; ++t) {
      for (size_t r = 0; r < w.rows; ++r) {
        y[t * w.rows + r] = k_with_mins(w.type)        ? canonical_k_with_mins(w, xq, r, t)
                            : w.type == DType::kIQ4_XS ? canonical_iq4_xs(w, xq, r, t)
                                                       : canonical_q6_k(w, xq, r, t);
      }
    }
    return y;
  }
  const size_t nb = w.cols / 32;
  std::vector<float> y(xq.n_tokens * w.rows);
  for (size_t t = 0; t < xq.n_tokens; ++t) {
    for (size_t r = 0; r < w.rows; ++r) {
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        const BlockInts32 blk = block_values(w, r, b);
        int32_t dot = 0, sum = 0;
        for (size_t j = 0; j < 32; ++j) {
          dot += blk.q[j] * xq.token_qs(t)[32 * b + j];
          sum += xq.token_qs(t)[32 * b + j];
        }
        const float da = xq.token_scales(t)[b];
        acc = std::fma(static_cast<float>(dot), blk.d * da, acc);
        if (has_block_min(w.type)) acc = std::fma(blk.m, da * static_cast<float>(sum), acc);
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

std::string describe(DType type, WeightLayout layout, Isa isa, size_t rows, size_t cols, size_t n) {
  return std::string(dtype_name(type)) + " " + weight_layout_name(layout) + " on " + std::string(isa_name(isa)) +
         ": rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " + std::to_string(n);
}

std::vector<std::pair<DType, WeightLayout>> all_layouts() {
  std::vector<std::pair<DType, WeightLayout>> out;
  for (DType type : kPackedTypes)
    for (WeightLayout layout : {WeightLayout::kPackedX16, WeightLayout::kPackedX8}) out.emplace_back(type, layout);
  return out;
}
const std::vector<std::pair<DType, WeightLayout>> kAllLayouts = all_layouts();

TEST(PackedWeights, UnpackToTheOriginalBlocks) {
  std::mt19937 rng(5);
  ThreadPool two(2);
  for (auto [type, layout] : kAllLayouts) {
    for (size_t rows : {1, 7, 8, 15, 16, 37}) {
      for (size_t cols : super_blocks(type) ? std::vector<size_t>{256, 2304} : std::vector<size_t>{32, 96, 2080}) {
        const test::TestMatrix w = test::make_matrix(type, rows, cols, rng);
        const PackedMatrix packed = PackedMatrix::pack(w.view(), layout);
        const PackedLayout p = PackedLayout::of(packed.view());
        EXPECT_EQ(packed.view().layout, layout);
        EXPECT_EQ(packed.view().bytes(), p.bytes());
        // Packed on two threads (groups side by side): the same bytes.
        const PackedMatrix parallel = PackedMatrix::pack(w.view(), layout, &two);
        ASSERT_EQ(parallel.view().bytes(), packed.view().bytes());
        EXPECT_EQ(std::memcmp(parallel.view().data, packed.view().data, p.bytes()), 0)
            << describe(type, layout, Isa::kScalar, rows, cols, 0) << " packed on two threads";
        // No more than the GGUF bytes plus the padding rows and one header half per group (Q4_1, Q5_1: a scale and
        // a min per row; Q4_K, Q5_K: 4 bytes more per row and super-block, the unpacked 6-bit scales; IQ4_XS: 4,
        // padding and the scales a byte each; Q6_K: 2, padding).
        const size_t g = p.group_rows, groups = (rows + g - 1) / g;
        const size_t extra = k_with_mins(type) || type == DType::kIQ4_XS ? groups * g * 4 * (cols / kSuperBlock)
                             : type == DType::kQ6_K                      ? groups * g * 2 * (cols / kSuperBlock)
                             : has_block_min(type)                       ? groups * 4 * g
                                                                         : groups * 2 * g;
        EXPECT_LE(packed.view().bytes(), groups * g * w.view().row_bytes() + extra);
        // Aligned units: every vector load of the kernels is aligned.
        EXPECT_EQ(p.unit_bytes() % (4 * g), 0u);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.view().data) % 64, 0u);
        std::vector<std::byte> row(w.view().row_bytes());
        for (size_t r = 0; r < rows; ++r) {
          unpack_row(packed.view(), r, row.data());
          ASSERT_EQ(std::memcmp(row.data(), w.view().row(r), row.size()), 0)
              << describe(type, layout, Isa::kScalar, rows, cols, 0) << " row " << r;
        }
      }
    }
  }
}

TEST(PackedWeights, LayoutForEachIsa) {
  // F16 and BF16 go in float panels (float_panels_test).
  for (DType type : {DType::kF32, DType::kQ2_K, DType::kQ3_K}) EXPECT_FALSE(packed_layout_for(type, best_isa()));
  for (DType type : kPackedTypes) {
    SCOPED_TRACE(dtype_name(type));
    EXPECT_FALSE(packed_layout_for(type, Isa::kScalar));
    if (isa_supported(Isa::kAvx2)) {
      EXPECT_EQ(packed_layout_for(type, Isa::kAvx2), WeightLayout::kPackedX8);
    }
    if (isa_supported(Isa::kAvx512) && cpu_has_avx512_vnni()) {
      EXPECT_EQ(packed_layout_for(type, Isa::kAvx512), WeightLayout::kPackedX16);
    }
  }
}

TEST(PackedWeights, MatmulIsTheCanonicalSumForEveryBatchSplitAndIsa) {
  const std::vector<PackedCase> cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "no packed kernel runs within this ISA limit";
  std::mt19937 rng(11);
  ThreadPool one(1), two(2);
  for (const PackedCase& c : cases) {
    for (size_t rows : kRows) {
      for (size_t cols : cols_for(c.type)) {
        const test::TestMatrix w = test::make_matrix(c.type, rows, cols, rng);
        const PackedMatrix packed = PackedMatrix::pack(w.view(), c.layout);
        const size_t g = PackedLayout::of(packed.view()).group_rows;
        for (size_t n : kTokens) {
          const std::string what = describe(c.type, c.layout, c.isa, rows, cols, n);
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
  using Shape = std::tuple<size_t, size_t, size_t>;  // rows, cols, tokens
  const std::vector<Shape> shapes = {{37, 2144, 5}, {500, 96, 1}, {96, 160, 6}, {32, 96, 1}};
  const std::vector<Shape> k_shapes = {{37, 2304, 5}, {500, 256, 1}, {96, 512, 6}, {32, 256, 1}};
  for (const PackedCase& c : cases) {
    for (auto [rows, cols, n] : super_blocks(c.type) ? k_shapes : shapes) {
      const test::TestMatrix w = test::make_matrix(c.type, rows, cols, rng);
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
        // Same exact block dots, fp32 sums (about 2 per block) in another order: within a few hundred ulps
        // of the magnitude of what is summed. The types with mins sum their scale and min parts apart, each larger
        // than the weights.
        const double magnitude = k_with_mins(w.type)     ? k_parts_magnitude(w, x, i % rows, i / rows)
                                 : has_block_min(w.type) ? block_parts_magnitude(w, x, i % rows, i / rows)
                                                         : exact.abs[i];
        EXPECT_NEAR(y_packed[i], y_rows[i], 1e-5 * magnitude)
            << describe(c.type, c.layout, c.isa, rows, cols, n) << " element " << i;
      }
    }
  }
}

// Blocks of `type` with arbitrary bytes, every third block all 0xff (Q4_K, Q5_K: scales and mins 63, every
// value 15 / 31; Q6_K: every value 63 with scale -1; the 32-value types and IQ4_XS: every level at the top, IQ4_XS's
// scales 31) or with Q6_K scale -128 and every value 0; the fp16 scales and mins random but finite.
void fill_arbitrary_blocks(test::TestMatrix& w, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  const size_t block_bytes = dtype_block_bytes(w.type);
  const auto set_half = [](std::byte* p, float v) {
    const uint16_t h = fp32_to_fp16(v);
    std::memcpy(p, &h, sizeof h);
  };
  for (size_t r = 0; r < w.rows; ++r) {
    for (size_t s = 0; s < w.cols / dtype_block_elements(w.type); ++s) {
      std::byte* blk = w.data.data() + r * w.view().row_bytes() + s * block_bytes;
      const int kind = static_cast<int>((r + s) % 3);
      for (size_t i = 0; i < block_bytes; ++i) blk[i] = std::byte(kind == 0 ? 0xff : byte(rng));
      if (w.type == DType::kQ4_K) {
        auto& b = *reinterpret_cast<BlockQ4_K*>(blk);
        b.d = fp32_to_fp16(scale(rng));
        b.dmin = fp32_to_fp16(scale(rng));
      } else if (w.type == DType::kQ5_K) {
        auto& b = *reinterpret_cast<BlockQ5_K*>(blk);
        b.d = fp32_to_fp16(scale(rng));
        b.dmin = fp32_to_fp16(scale(rng));
      } else if (w.type == DType::kQ6_K) {
        auto& b = *reinterpret_cast<BlockQ6_K*>(blk);
        b.d = fp32_to_fp16(scale(rng));
        if (kind == 1) {
          std::memset(b.ql, 0, sizeof b.ql);
          std::memset(b.qh, 0, sizeof b.qh);
          std::memset(b.scales, 0x80, sizeof b.scales);
        }
      } else {  // d first; Q4_1 and Q5_1: m next
        set_half(blk, scale(rng));
        if (has_block_min(w.type)) set_half(blk + 2, scale(rng));
      }
    }
  }
}

// Blocks of arbitrary bytes and at their limits against activations at the int8 limits: the packed kernels are still
// the canonical sum (no int16 or int32 overflow, exact block dots).
TEST(PackedWeights, ArbitraryBlocksAreTheCanonicalSum) {
  const std::vector<PackedCase> cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "no packed kernel runs within this ISA limit";
  std::mt19937 rng(17);
  ThreadPool two(2);
  const size_t rows = 24, cols = 1024;
  for (const PackedCase& c : cases) {
    test::TestMatrix w = test::make_matrix(c.type, rows, cols, rng);
    fill_arbitrary_blocks(w, rng);
    const PackedMatrix packed = PackedMatrix::pack(w.view(), c.layout);
    for (size_t n : {1, 4, 7}) {
      std::vector<float> x = test::make_activations(n, cols, rng);
      for (size_t i = 0; i < x.size(); i += 2) x[i] = x[i] < 0 ? -1.0f : 1.0f;  // +-127 after quantization
      QuantizedActivations xq;
      quantize_activations(x, n, cols, xq, two, c.isa);
      std::vector<float> y(n * rows, -1.0f);
      matmul_quantized(packed.view(), xq, y, two, c.isa);
      expect_same_bits(y, canonical_product(w, xq), describe(c.type, c.layout, c.isa, rows, cols, n));
    }
  }
}

}  // namespace
}  // namespace kvs
