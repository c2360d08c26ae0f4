// The GPU tests' fixture: device 0 opened with the operations' pipelines, or the test skipped with the reason
// (no Vulkan in this build, no driver, no device); buffers filled from and read back to host vectors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/gpu_ops.h"

namespace kvs::test {

// Why the GPU tests cannot run here ("no Vulkan: ...", "the Vulkan loader found no device"), or empty.
inline std::string vulkan_missing() {
  auto devices = list_gpu_devices();
  if (!devices) return "no Vulkan: " + devices.status().message();
  return devices->empty() ? "the Vulkan loader found no device" : "";
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = vulkan_missing(); !why.empty()) GTEST_SKIP() << why;
    devices_ = *list_gpu_devices();
    auto context = VulkanContext::create(0);
    ASSERT_TRUE(context) << context.status().message();
    context_ = std::move(*context);
    auto ops = GpuOps::create(*context_);
    ASSERT_TRUE(ops) << ops.status().message();
    ops_ = std::move(*ops);
  }
  // A device-local buffer holding `bytes` (at least 4 bytes).
  std::unique_ptr<GpuBuffer> device_buffer(std::span<const std::byte> bytes) {
    auto b = GpuBuffer::create(*context_, std::max<size_t>(bytes.size(), 4), GpuMemory::kDeviceLocal);
    EXPECT_TRUE(b) << b.status().message();
    EXPECT_TRUE((*b)->upload(bytes));
    return std::move(*b);
  }
  template <class T>
  std::unique_ptr<GpuBuffer> device_buffer(const std::vector<T>& v) {
    return device_buffer(std::as_bytes(std::span(v)));
  }
  template <class T = float>
  std::vector<T> download(const GpuBuffer& b, size_t n) {
    std::vector<T> out(n);
    EXPECT_TRUE(b.download(std::as_writable_bytes(std::span(out))));
    return out;
  }

  std::vector<GpuDeviceInfo> devices_;
  std::unique_ptr<VulkanContext> context_;
  std::unique_ptr<GpuOps> ops_;
};

}  // namespace kvs::test
