// The Vulkan runtime on a real driver (Mesa's lavapipe here and in CI; any GPU where one is present): the device
// listing, buffers in device-local and host-visible memory, a compute pipeline built from the embedded SPIR-V, and
// its errors. A machine without a Vulkan device skips these tests and says why.
//
// The probe's check is exact: it sums 32-bit words modulo 2^32 on the device (integer adds, any order), the test
// sums them on the host the same way.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "gpu/stream_probe.h"
#include "gpu_test_fixture.h"

namespace kvs {
namespace {

using VulkanRuntime = test::GpuTest;

TEST_F(VulkanRuntime, DevicesAreListedWithTheLimitsKvserveGoesBy) {
  for (const GpuDeviceInfo& d : devices_) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.device_local_bytes, 0u) << d.name;
    EXPECT_GE(d.max_storage_buffer_range, uint64_t{1} << 27) << d.name << ": Vulkan guarantees 128 MiB";
    EXPECT_TRUE(d.subgroup_size > 0 && (d.subgroup_size & (d.subgroup_size - 1)) == 0) << d.subgroup_size;
    EXPECT_GE(d.max_workgroup_invocations, 128u) << d.name << ": Vulkan guarantees 128";
    if (d.name.find("llvmpipe") != std::string::npos) {  // lavapipe: what the issue measured on these machines
      EXPECT_EQ(d.type, "cpu");
      EXPECT_EQ(d.max_storage_buffer_range, uint64_t{128} << 20);
    }
  }
  EXPECT_EQ(context_->info().name, devices_[0].name);
}

TEST_F(VulkanRuntime, StreamProbeReadsEveryWordOfABuffer) {
  auto probe = StreamProbe::create(*context_);
  ASSERT_TRUE(probe) << probe.status().message();
  std::mt19937 rng(3);
  // One uvec4; a count that is no multiple of a workgroup; more than 1024 workgroups' worth (the grid-stride loop).
  for (size_t words :
       {size_t{4}, size_t{1000}, size_t{4} * StreamProbe::kWorkgroup * StreamProbe::kMaxWorkgroups + 36}) {
    std::vector<uint32_t> data(words);
    for (uint32_t& w : data) w = static_cast<uint32_t>(rng());
    const uint32_t want = std::accumulate(data.begin(), data.end(), uint32_t{0});
    for (GpuMemory memory : {GpuMemory::kDeviceLocal, GpuMemory::kHostVisible}) {
      auto buffer = GpuBuffer::create(*context_, words * sizeof(uint32_t), memory);
      ASSERT_TRUE(buffer) << buffer.status().message();
      ASSERT_TRUE((*buffer)->upload(std::as_bytes(std::span(data))));
      auto sum = (*probe)->sum(**buffer, words);
      ASSERT_TRUE(sum) << sum.status().message();
      EXPECT_EQ(*sum, want) << words << " words, " << (memory == GpuMemory::kDeviceLocal ? "device" : "host");
      // Every word counts: one changed word changes the sum.
      data[words / 2] += 1;
      ASSERT_TRUE((*buffer)->upload(std::as_bytes(std::span(data))));
      EXPECT_EQ(*(*probe)->sum(**buffer, words), want + 1);
      data[words / 2] -= 1;
    }
  }
}

TEST_F(VulkanRuntime, BuffersRoundTripAtOffsetsAndRefuseWhatDoesNotFit) {
  auto buffer = GpuBuffer::create(*context_, 1000, GpuMemory::kDeviceLocal);
  ASSERT_TRUE(buffer) << buffer.status().message();
  std::vector<std::byte> in(300), out(300);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::byte(i * 7 + 1);
  ASSERT_TRUE((*buffer)->upload(in, 700));
  ASSERT_TRUE((*buffer)->download(out, 700));
  EXPECT_EQ(in, out);
  const Status past = (*buffer)->upload(in, 701);
  EXPECT_EQ(past.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(past.message().find("300 bytes at 701"), std::string::npos) << past.message();
  EXPECT_EQ(GpuBuffer::create(*context_, 0, GpuMemory::kDeviceLocal).status().code(), ErrorCode::kInvalidArgument);
  // More than the device has: an error that names the size, not a crash.
  const size_t too_much = context_->info().device_local_bytes * 4;
  auto huge = GpuBuffer::create(*context_, too_much, GpuMemory::kDeviceLocal);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.status().message().find(std::to_string(too_much)), std::string::npos) << huge.status().message();
  auto missing = VulkanContext::create(devices_.size());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find(fmt::format("no Vulkan device {}", devices_.size())), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace kvs
