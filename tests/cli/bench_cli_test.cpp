// `kvserve bench --quick` end to end on the default (stories260K) model: the table, the JSON keys,
// the SVG and the progress lines. Only the shape of the output is checked, never a speed.
#include <gtest/gtest.h>

#include <string>

#include "run_kvserve.h"

namespace kvs {
namespace {

TEST(BenchCli, QuickRunWritesTableJsonAndPlot) {
  test::TempDir dir("cli_bench");
  const std::string json_path = dir.file("out.json"), svg_path = dir.file("out.svg");
  auto r = test::run_kvserve(
      {"bench", "-m", test::default_model_path(), "--quick", "--threads", "1", "--json", json_path, "--plot", svg_path},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const nlohmann::json j = nlohmann::json::parse(test::read_file(json_path));
  for (const char* key : {"prefill_tok_s", "decode_tok_s", "memory_bandwidth_gbs", "decode_bandwidth_gbs",
                          "roofline_fraction", "no_cache_speedup", "peak_gflops", "prefill_peak_fraction",
                          "paging_decode_cost_percent", "paging_waste_percent", "paging_fit_ratio", "details"}) {
    EXPECT_TRUE(j.contains(key)) << "missing " << key << " in " << j.dump(2);
  }
  EXPECT_TRUE(j["prefill_tok_s"].contains("16"));
  EXPECT_TRUE(j["prefill_tok_s"].contains("64"));
  for (const char* depth : {"0", "64", "256"}) {
    ASSERT_TRUE(j["decode_tok_s"].contains(depth)) << j["decode_tok_s"].dump();
    EXPECT_GT(j["decode_tok_s"][depth].get<double>(), 0.0);
  }
  EXPECT_TRUE(j["no_cache_speedup"].contains("16"));
  EXPECT_TRUE(j["no_cache_speedup"].contains("64"));
  EXPECT_GT(j["memory_bandwidth_gbs"].get<double>(), 0.0);
  EXPECT_GT(j["peak_gflops"].get<double>(), 0.0);
  EXPECT_GT(j["paging_fit_ratio"].get<double>(), 1.0);
  EXPECT_EQ(j["reps"].get<int>(), 2);

  const std::string svg = test::read_file(svg_path);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);

  EXPECT_NE(r.out.find("| Depth | paged tok/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Roofline"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("decode 16 tokens at depth 256"), std::string::npos) << r.err;  // progress, plain lines
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "not a terminal: no carriage returns";
}

TEST(BenchCli, BadFlagsAreRejected) {
  test::TempDir dir("cli_bench_flags");
  auto r = test::run_kvserve({"bench", "--reps", "0", "--quick"}, dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("reps"), std::string::npos) << r.err;
  auto missing = test::run_kvserve({"bench", "-m", dir.file("nope.gguf"), "--quick"}, dir);
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_NE(missing.err.find("nope.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace kvs
