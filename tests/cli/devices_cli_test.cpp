// kvserve devices: the CPU and every Vulkan device the loader finds (lavapipe here), as lines and as JSON that agree.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// --device vulkan on the commands that run a model: the story `run` generates and the perplexity of held-out text
// are the CPU's, with an f32 cache (perplexity within 1e-4 relative: the bound; measured equal to 1e-8 in the
// mean NLL) and with int8 and int4 K/V, keys per token and per channel (the default). Quantized, where the two sides'
// fp32 K/V straddle a quantization boundary a value is stored a step apart: a few elements, against the quantization of
// every element, which moves the perplexity from the f32 cache's by Q; a quarter of Q is the bound (measured over these
// 3 chunks: int8 GPU 0.999810 of the CPU's, 0.16 Q; the CPU's own scalar and AVX-512 paths differ by 0.08 Q; int4 2e-6
// relative).
// For the model `model_args` names, each of `kv_flags`: `run`'s greedy story on the GPU is the CPU's, and perplexity
// over 3 chunks of `chunk` tokens is the CPU's within 1e-4 of it, or within a quarter of what the K/V format itself
// moves the CPU's perplexity (from an f32 cache, the first of kv_flags).
void expect_devices_agree(const std::vector<std::string>& model_args,
                          const std::vector<std::vector<std::string>>& kv_flags, const std::string& chunk,
                          const test::TempDir& dir) {
  double f32_perplexity = 0.0;  // the CPU's, with an f32 cache
  for (const std::vector<std::string>& kv : kv_flags) {
    const std::string what = kv.empty() ? "f32 K/V" : kv[1] + (kv.size() > 2 ? " K/V per token" : " K/V");
    std::string story[2];
    double perplexity[2];
    for (int gpu = 0; gpu < 2; ++gpu) {
      const std::string device = gpu ? "vulkan" : "cpu";
      std::vector<std::string> run_args{"run", "-p", "Once upon a time", "-n", "40", "--temp", "0", "--device", device};
      std::vector<std::string> ppl_args{"perplexity", "-f",       test::shared_path("eval/tinystories_valid_head.txt"),
                                        "--chunk",    chunk,      "--chunks",
                                        "3",          "--device", device};
      for (std::vector<std::string>* args : {&run_args, &ppl_args}) {
        args->insert(args->end(), model_args.begin(), model_args.end());
        args->insert(args->end(), kv.begin(), kv.end());
      }
      const auto run = run_kvserve(run_args, dir);
      ASSERT_EQ(run.exit_code, 0) << run.err;
      story[gpu] = run.out;
      if (gpu) {
        EXPECT_NE(run.err.find("on vulkan"), std::string::npos) << run.err;
      }
      const auto ppl = run_kvserve(ppl_args, dir);
      ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
      const size_t at = ppl.out.rfind("perplexity ");
      ASSERT_NE(at, std::string::npos) << ppl.out;
      perplexity[gpu] = std::stod(ppl.out.substr(at + 11));
    }
    EXPECT_EQ(story[1], story[0]) << what;
    if (kv.empty()) f32_perplexity = perplexity[0];
    const double quantization = std::fabs(perplexity[0] - f32_perplexity);
    EXPECT_NEAR(perplexity[1], perplexity[0], std::max(1e-4 * perplexity[0], 0.25 * quantization)) << what;
  }
}

// stories260K with every K/V format, a Gemma-3-shaped file (tiny-gemma3 with a window of 40 tokens, 256-token
// chunks past it: GeGLU, the head norms, two RoPE bases, the window pools) and a DeepSeek-V2-shaped one (MLA, its
// prompt chunks expanded, the experts routed on the device).
TEST(DevicesCli, RunAndPerplexityOnTheGpuAreTheCpus) {
  test::TempDir dir("cli_device_vulkan");
  const auto listing = run_kvserve({"devices", "--json"}, dir);
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  const nlohmann::json d = nlohmann::json::parse(listing.out);
  if (d.contains("vulkan_error") || d["vulkan"].empty()) GTEST_SKIP() << "no Vulkan device";
  expect_devices_agree({},
                       {{},
                        {"--kv-dtype", "int8", "--kv-key-scales", "token"},
                        {"--kv-dtype", "int4", "--kv-key-scales", "token"},
                        {"--kv-dtype", "int8"},
                        {"--kv-dtype", "int4"}},
                       "128", dir);
  const std::string gemma = dir.file("gemma3.gguf");
  const auto synth =
      run_kvserve({"synth", "--preset", "tiny-gemma3", "--ctx", "1024", "--sliding-window", "40", "-o", gemma}, dir);
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  expect_devices_agree({"-m", gemma}, {{}, {"--kv-dtype", "int8"}}, "256", dir);
  const std::string deepseek = dir.file("deepseek2.gguf");
  const auto synth_deepseek = run_kvserve({"synth", "--preset", "tiny-deepseek2", "-o", deepseek}, dir);
  ASSERT_EQ(synth_deepseek.exit_code, 0) << synth_deepseek.err;
  expect_devices_agree({"-m", deepseek}, {{}, {"--kv-dtype", "int8"}}, "256", dir);
  const auto missing = run_kvserve({"run", "-p", "Hi", "-n", "4", "--device", "vulkan:9"}, dir);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("--device vulkan:9: no Vulkan device 9"), std::string::npos) << missing.err;
  const auto bad = run_kvserve({"run", "-p", "Hi", "-n", "4", "--device", "opencl"}, dir);
  EXPECT_NE(bad.err.find("--device must be cpu, vulkan or vulkan:N, got 'opencl'"), std::string::npos) << bad.err;
}

// The start-up line names the KV pool's bytes and where they are; --profile prints the time per shader kind; bench
// --device vulkan measures B* with a probe whose sum proved every word read, then prefill and decode against it.
TEST(DevicesCli, TheGpuReportsItsMemoryProfilesAndBenchmarks) {
  test::TempDir dir("cli_device_bench");
  if (vulkan_devices(dir) == 0) GTEST_SKIP() << "no Vulkan device";
  const auto run = run_kvserve({"run", "-p", "Once upon a time", "-n", "8", "--device", "vulkan", "--profile"}, dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("KV pool"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("in device memory"), std::string::npos) << run.err;  // lavapipe maps its own memory
  EXPECT_NE(run.err.find("--profile, 8 steps on the device"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("paged_attention"), std::string::npos) << run.err;
  const auto cpu_profile = run_kvserve({"run", "-p", "Hi", "-n", "2", "--profile"}, dir);
  EXPECT_NE(cpu_profile.err.find("--profile times the GPU's shaders: it needs --device vulkan"), std::string::npos)
      << cpu_profile.err;

  const std::string json = dir.file("bench.json");
  const auto bench = run_kvserve({"bench", "--device", "vulkan", "-m", test::default_model_path(), "--kv-depths",
                                  "0,32", "--kv-tokens", "4", "--reps", "1", "--json", json},
                                 dir);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("| decode at depth 32 |"), std::string::npos) << bench.out;
  const nlohmann::json b = nlohmann::json::parse(test::read_file(json));
  EXPECT_GT(b["probe"]["bytes_per_second"].get<double>(), 0.0);
  EXPECT_GT(b["prefill"]["tok_s"].get<double>(), 0.0);
  ASSERT_EQ(b["decode"].size(), 2u);
  for (const auto& d : b["decode"]) {
    EXPECT_GT(d["tok_s"].get<double>(), 0.0);
    // What a token reads at least: every layer's matrices and the output matrix.
    EXPECT_GT(d["bytes_per_token"].get<double>(), 0.5 * b["weight_bytes"].get<double>());
    EXPECT_GT(d["share_of_b_star"].get<double>(), 0.0);
  }
}

}  // namespace
}  // namespace kvs
