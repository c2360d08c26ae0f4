// The forward pass's shaders against their CPU twins on random inputs of awkward sizes (one row, widths that are no
// multiple of a subgroup or a workgroup, several tokens), as llama.cpp's test-backend-ops does.
//
// Bounds from the arithmetic (u = 2^-24): the CPU sums in one order, the shader in another (lanes, then subgroupAdd,
// then subgroups), each sum of n terms off by at most (n - 1) u sum|terms|, so they differ by at most 2 n u sum|terms|.
// RMSNorm's CPU sum of squares is double: the shader's fp32 sum is off by n u relatively, its square root by half
// that, and inversesqrt (2 ulp in Vulkan) and two multiplications add 8 u: |dy| <= (n / 2 + 8) u |y| (+ 1e-30).
#include "gpu/gpu_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/thread_pool.h"
#include "tensor/convert.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

constexpr double kU = 0x1p-24;

class GpuOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = list_gpu_devices();
    if (!devices) GTEST_SKIP() << "no Vulkan: " << devices.status().message();
    if (devices->empty()) GTEST_SKIP() << "the Vulkan loader found no device";
    auto context = VulkanContext::create(0);
    ASSERT_TRUE(context) << context.status().message();
    context_ = std::move(*context);
    auto ops = GpuOps::create(*context_);
    ASSERT_TRUE(ops) << ops.status().message();
    ops_ = std::move(*ops);
  }
  // A device-local buffer holding `bytes`.
  std::unique_ptr<GpuBuffer> device_buffer(std::span<const std::byte> bytes) {
    auto b = GpuBuffer::create(*context_, bytes.size(), GpuMemory::kDeviceLocal);
    EXPECT_TRUE(b) << b.status().message();
    EXPECT_TRUE((*b)->upload(bytes));
    return std::move(*b);
  }
  std::vector<float> download(const GpuBuffer& b, size_t n) {
    std::vector<float> out(n);
    EXPECT_TRUE(b.download(std::as_writable_bytes(std::span(out))));
    return out;
  }
  std::unique_ptr<VulkanContext> context_;
  std::unique_ptr<GpuOps> ops_;
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
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    for (uint32_t cols : {32u, 96u, 2080u}) {
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
          auto yb = device_buffer(std::as_bytes(std::span(want)));
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
  auto any = device_buffer(std::vector<std::byte>(64));
  const Status refused = ops_->matvec(DType::kQ4_K, *any, *any, *any, 1, 256, 1);
  EXPECT_EQ(refused.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(refused.message().find("q4_k"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace kvs
