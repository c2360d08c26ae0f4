// SVG line charts for `kvserve bench --plot`: a self-contained file with no scripts or fonts to fetch.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_results.h"

namespace kvs {

struct PlotSeries {
  std::string name = {};
  std::string color = {};  // any SVG colour, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points =
      {};  // (x, y), drawn in order; non-positive values skipped on log axes
};

struct PlotPanel {
  std::string title = {};
  std::string x_label = {};
  std::string y_label = {};
  bool log_x = false;
  bool log_y = false;
  bool legend_at_bottom = false;  // where the data leaves room: top-left (default) or bottom-left
  bool x_ticks_at_points = true;  // a tick at every x of the data (few points), or evenly spaced (many)
  bool y_from_zero = true;        // a linear y axis starts at 0, or at the data's lowest value
  std::vector<PlotSeries> series = {};
};

// The panels side by side, each with axes, ticks, one <polyline> per series and a legend.
std::string render_svg(std::span<const PlotPanel> panels);

// The two charts of a run: ms per generated token vs context with and without the KV cache
// (log-log, so linear vs quadratic growth show as slopes 0-1 vs 1-2), and decode tok/s vs depth,
// paged and contiguous.
std::vector<PlotPanel> bench_panels(const BenchResults& results);

}  // namespace kvs
