// The JSON, table and SVG of `kvserve bench`, drawn from hand-made results (nothing is timed).
#include "bench/bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "bench/bench_svg.h"

namespace kvs {
namespace {

Summary flat(double v) { return {.count = 3, .mean = v, .stddev = 0.1 * v, .min = 0.9 * v, .max = 1.1 * v}; }

BenchResults sample_results() {
  BenchResults r;
  r.threads = 2;
  r.isa = "avx512";
  r.peak_gflops = flat(200.0);
  r.model = {.path = "m.gguf", .weight_type = "q8_0", .layers = 22, .matrix_bytes = 1000};
  r.prefill.model = r.model;
  r.prefill.runs = {{.tokens = 128, .tok_s = flat(50), .gflops = flat(100), .peak_fraction = 0.5},
                    {.tokens = 512, .tok_s = flat(45), .gflops = flat(90), .peak_fraction = 0.45}};
  PrefillSet extra;
  extra.model.path = "b.gguf";
  extra.model.weight_type = "bf16";
  extra.runs = {{.tokens = 128, .tok_s = flat(40), .gflops = flat(80), .peak_fraction = 0.4}};
  r.prefill_extra = extra;
  for (size_t depth : {0, 512, 2048}) {
    r.decode.push_back({.depth = depth,
                        .tokens = 128,
                        .paged_tok_s = flat(30.0 - depth / 512.0),
                        .contiguous_tok_s = flat(30.5 - depth / 512.0),
                        .paging_cost_percent = flat(1.5),
                        .paged_median_tok_s = flat(40.0),
                        .contiguous_median_tok_s = flat(40.4),
                        .paging_cost_median_percent = flat(1.0),
                        .bytes_per_token = 1.1e9,
                        .bandwidth_gbs = flat(33.0)});
  }
  r.roofline = {.depth = 0,
                .probe_gbs = flat(50.0),
                .decode_gbs = flat(33.0),
                .fraction = flat(0.66),
                .decode_median_gbs = flat(44.0),
                .median_fraction = flat(0.88)};
  for (size_t context : {16, 64, 256, 1024}) {
    const double c = static_cast<double>(context);
    r.cache.push_back(
        {.context = context, .cached_ms = flat(30.0), .uncached_ms = flat(c * 20.0), .speedup = flat(c * 20.0 / 30.0)});
  }
  r.paging = {.num_sequences = 64,
              .block_size = 16,
              .slot_tokens = 2048,
              .tokens_held = 66000,
              .paged_waste_percent = 0.7,
              .contiguous_waste_percent = 49.6,
              .contiguous_fit = 16,
              .paged_fit = 31,
              .fit_ratio = 31.0 / 16.0};
  r.notes = {"a note"};
  return r;
}

TEST(BenchReport, JsonHasTheRequiredKeysWithMeans) {
  const nlohmann::json j = bench_json(sample_results(), {.date = "2025-01-01T00:00:00Z", .command = "kvserve bench"});
  EXPECT_DOUBLE_EQ(j.at("prefill_tok_s").at("128").get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(j.at("prefill_tok_s").at("512").get<double>(), 45.0);
  EXPECT_DOUBLE_EQ(j.at("decode_tok_s").at("0").get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(j.at("decode_tok_s").at("2048").get<double>(), 26.0);
  EXPECT_DOUBLE_EQ(j.at("memory_bandwidth_gbs").get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(j.at("decode_bandwidth_gbs").get<double>(), 33.0);
  EXPECT_DOUBLE_EQ(j.at("roofline_fraction").get<double>(), 0.66);
  EXPECT_NEAR(j.at("no_cache_speedup").at("1024").get<double>(), 1024 * 20.0 / 30.0, 1e-9);
  EXPECT_DOUBLE_EQ(j.at("peak_gflops").get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(j.at("prefill_peak_fraction").at("128").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j.at("prefill_bf16_peak_fraction").at("128").get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(j.at("paging_decode_cost_percent").at("512").get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j.at("paging_waste_percent").get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(j.at("roofline_fraction_median_step").get<double>(), 0.88);
  EXPECT_DOUBLE_EQ(j.at("decode_tok_s_median_step").at("0").get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(j.at("paging_decode_cost_percent_median_step").at("2048").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j.at("contiguous_waste_percent").get<double>(), 49.6);
  EXPECT_NEAR(j.at("paging_fit_ratio").get<double>(), 31.0 / 16.0, 1e-12);
  EXPECT_EQ(j.at("details").at("decode").at("512").at("paged_tok_s").at("count").get<size_t>(), 3u);
  EXPECT_EQ(j.at("date").get<std::string>(), "2025-01-01T00:00:00Z");
  EXPECT_EQ(j.at("notes").size(), 1u);
}

TEST(BenchReport, TableShowsEverySection) {
  const std::string t = bench_table(sample_results(), {.date = "2025-01-01T00:00:00Z"});
  for (const char* expected : {"fp32 FMA peak", "| Prefill (q8_0) tokens", "| Prefill (bf16) tokens", "| 512 |",
                               "| 2048 |", "Roofline at depth 0", "66%", "88%", "| Depth |", "| 1024 |",
                               "contiguous slots of 2048", "paged, blocks of 16", "(1.94×)", "Note: a note"}) {
    EXPECT_NE(t.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << t;
  }
}

TEST(BenchSvg, DrawsBothPanelsWithOnePolylinePerSeries) {
  const std::vector<PlotPanel> panels = bench_panels(sample_results());
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(panels[0].series[0].points.size(), 4u);
  EXPECT_EQ(panels[1].series[1].points.size(), 3u);
  const std::string svg = render_svg(panels);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 4u);
  EXPECT_NE(svg.find("with KV cache"), std::string::npos);
  EXPECT_NE(svg.find("contiguous KV"), std::string::npos);
}

TEST(BenchSvg, EscapesTextAndSkipsNonPositivePointsOnLogAxes) {
  const PlotPanel panel{.title = "a < b & c",
                        .log_x = true,
                        .log_y = true,
                        .series = {{.name = "s", .color = "red", .points = {{0.0, 1.0}, {10.0, 2.0}, {100.0, 4.0}}}}};
  const std::string svg = render_svg({&panel, 1});
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  const size_t start = svg.find("points=\"");
  ASSERT_NE(start, std::string::npos);
  const std::string points = svg.substr(start + 8, svg.find('"', start + 8) - start - 8);
  EXPECT_EQ(std::count(points.begin(), points.end(), ','), 2) << points;  // x = 0 dropped
}

}  // namespace
}  // namespace kvs
