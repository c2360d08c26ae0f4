// `kvserve bench --quick` end to end on the default (stories260K) model: the table, the JSON keys,
// the SVG and the progress lines. Only the shape of the output is checked, never a speed.
#include <gtest/gtest.h>

#include <string>

#include "run_kvserve.h"
#include "tensor/packed_weights.h"

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
  EXPECT_GT(j["peak_int8_gops"].get<double>(), 0.0);
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

// --weights-only: the longest prompt, the first depth, and no cache-vs-recompute curve (table, JSON and plot).
TEST(BenchCli, WeightsOnlyMeasuresOnePromptAndOneDepth) {
  test::TempDir dir("cli_bench_weights");
  const std::string json_path = dir.file("out.json"), svg_path = dir.file("out.svg");
  auto r = test::run_kvserve({"bench", "-m", test::default_model_path(), "--quick", "--weights-only", "--threads", "1",
                              "--reps", "1", "--json", json_path, "--plot", svg_path},
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(test::read_file(json_path));
  ASSERT_EQ(j["prefill_tok_s"].size(), 1u) << j["prefill_tok_s"].dump();
  EXPECT_GT(j["prefill_tok_s"]["64"].get<double>(), 0.0);
  ASSERT_EQ(j["decode_tok_s"].size(), 1u) << j["decode_tok_s"].dump();
  EXPECT_GT(j["decode_tok_s"]["0"].get<double>(), 0.0);
  EXPECT_GT(j["roofline_fraction"].get<double>(), 0.0);
  EXPECT_FALSE(j.contains("no_cache_speedup")) << j["no_cache_speedup"].dump();
  EXPECT_NE(j["command"].get<std::string>().find("--weights-only"), std::string::npos);
  EXPECT_EQ(r.out.find("| Context |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Roofline"), std::string::npos) << r.out;
  const std::string svg = test::read_file(svg_path);
  EXPECT_NE(svg.find("Decode throughput"), std::string::npos);
  EXPECT_EQ(svg.find("Time per generated token"), std::string::npos);
}

// Q8_0 weights are repacked at load where a packed kernel runs (AVX2 or AVX-512), and --no-repack keeps the file's
// layout; the table's header says which one ran.
TEST(BenchCli, NoRepackKeepsTheFileLayout) {
  test::TempDir dir("cli_bench_repack");
  const std::string model = dir.file("q8.gguf");
  auto synth = test::run_kvserve({"synth", "--preset", "tiny-gqa", "--type", "q8_0", "-o", model}, dir);
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const std::vector<std::string> args = {"bench", "-m", model, "--quick", "--threads", "2", "--reps", "1"};
  auto packed = test::run_kvserve(args, dir);
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  const auto layout = packed_layout_for(DType::kQ8_0);
  const std::string expected = "(q8_0, " + std::string(layout ? weight_layout_name(*layout) : "gguf") + " layout;";
  EXPECT_NE(packed.out.find(expected), std::string::npos) << packed.out;
  std::vector<std::string> no_repack = args;
  const std::string json_path = dir.file("plain.json");
  for (const char* a : {"--no-repack", "--json"}) no_repack.push_back(a);
  no_repack.push_back(json_path);
  auto plain = test::run_kvserve(no_repack, dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("(q8_0, gguf layout;"), std::string::npos) << plain.out;
  const nlohmann::json j = nlohmann::json::parse(test::read_file(json_path));
  EXPECT_EQ(j["model"]["weight_layout"], "gguf");
  EXPECT_NE(j["command"].get<std::string>().find("--no-repack"), std::string::npos) << j["command"];
}

// --kv-types with layouts on a gemma3 file: the hybrid layout holds less at depth than one pool for all layers,
// a forced window of 4 less still; the figures are in the JSON. (Shapes and bytes only, never a speed.)
TEST(BenchCli, KvLayoutsOfAWindowModelReportTheBytesEachHolds) {
  test::TempDir dir("cli_bench_layouts");
  const std::string model = dir.file("g.gguf"), json_path = dir.file("layouts.json");
  ASSERT_EQ(test::run_kvserve({"synth", "--preset", "tiny-gemma3", "-o", model}, dir).exit_code, 0);
  auto r = test::run_kvserve({"bench", "-m", model, "--kv-types", "f32,f32@global,f16@w4", "--kv-depths", "0,200",
                              "--kv-tokens", "4", "--reps", "1", "--threads", "2", "--json", json_path},
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("f32@global"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(test::read_file(json_path));
  ASSERT_EQ(j["types"].size(), 3u);
  const auto held = [&](size_t type) { return j["types"][type]["decode"][1]["kv_bytes_held"].get<size_t>(); };
  EXPECT_EQ(j["types"][2]["kv_type"], "f16@w4");
  EXPECT_LT(held(0) * 3, held(1)) << "6 of 7 layers hold their window of 8, not 204 tokens";
  EXPECT_LT(held(2), held(0));
  auto bad = test::run_kvserve({"bench", "-m", model, "--kv-types", "f32@w"}, dir);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("'@w' in 'f32@w'"), std::string::npos) << bad.err;
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
