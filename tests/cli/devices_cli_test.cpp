// kvserve devices: the CPU and every Vulkan device the loader finds (lavapipe here), as lines and as JSON that agree.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_kvserve.h"
#include "test_support.h"

namespace kvs {
namespace {

TEST(DevicesCli, ListsTheCpuAndEachVulkanDeviceAsLinesAndJson) {
  test::TempDir dir("cli_devices");
  const auto json = run_kvserve({"devices", "--json"}, dir);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json d = nlohmann::json::parse(json.out);
  EXPECT_GE(d["cpu"]["threads"].get<int>(), 1);
  EXPECT_FALSE(d["cpu"]["name"].get<std::string>().empty());
  const auto lines = run_kvserve({"devices"}, dir);
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  EXPECT_EQ(lines.out.rfind("cpu ", 0), 0u) << lines.out;
  EXPECT_NE(lines.out.find("kernels " + d["cpu"]["isa"].get<std::string>()), std::string::npos) << lines.out;
  if (d.contains("vulkan_error")) {  // no Vulkan in this build or on this machine: the line says why
    EXPECT_NE(lines.out.find("vulkan    none: " + d["vulkan_error"].get<std::string>()), std::string::npos)
        << lines.out;
    GTEST_SKIP() << "no Vulkan: " << d["vulkan_error"].get<std::string>();
  }
  ASSERT_TRUE(d["vulkan_built"].get<bool>());
  for (const auto& device : d["vulkan"]) {
    const std::string line = fmt::format("vulkan:{}  {} ({}", device["index"].get<int>(),
                                         device["name"].get<std::string>(), device["type"].get<std::string>());
    EXPECT_NE(lines.out.find(line), std::string::npos) << line << "\n" << lines.out;
    EXPECT_NE(lines.out.find(fmt::format("subgroup {}", device["subgroup_size"].get<int>())), std::string::npos);
    EXPECT_GT(device["max_storage_buffer_range"].get<uint64_t>(), 0u);
  }
}

}  // namespace
}  // namespace kvs
