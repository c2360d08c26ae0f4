#include "bench/bench_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvs {
namespace {

constexpr double kPanelWidth = 480, kPanelHeight = 360;
constexpr double kLeft = 72, kRight = 20, kTop = 44, kBottom = 56;

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string tick_label(double v) {
  if (v != 0.0 && (std::abs(v) >= 1e5 || std::abs(v) < 1e-2)) return fmt::format("{:.0e}", v);
  if (v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

// Maps data values to pixels along one axis.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;  // data range (log10 of it when log)
  double pixel_lo = 0, pixel_hi = 1;

  double value(double v) const { return log ? std::log10(v) : v; }
  double pixel(double v) const {
    const double t = hi > lo ? (value(v) - lo) / (hi - lo) : 0.5;
    return pixel_lo + t * (pixel_hi - pixel_lo);
  }
};

// Data range of one coordinate over all drawable points; a linear axis starts at 0.
Axis make_axis(const PlotPanel& panel, bool x, bool log, double pixel_lo, double pixel_hi, bool from_zero = true) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const PlotSeries& s : panel.series) {
    for (const auto& [px, py] : s.points) {
      const double v = x ? px : py;
      if (log && v <= 0) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!(lo <= hi)) lo = hi = 1.0;
  Axis a{.log = log, .pixel_lo = pixel_lo, .pixel_hi = pixel_hi};
  if (log) {
    a.lo = std::floor(std::log10(lo));
    a.hi = std::max(std::ceil(std::log10(hi)), a.lo + 1);
  } else if (!from_zero) {  // the data's range, padded by a twentieth each side
    const double pad = hi > lo ? (hi - lo) / 20 : 1.0;
    a.lo = lo - pad;
    a.hi = hi + pad;
  } else {
    a.lo = x ? std::min(0.0, lo) : 0.0;
    a.hi = hi > a.lo ? hi * 1.08 : a.lo + 1;
  }
  return a;
}

std::vector<double> axis_ticks(const Axis& a) {
  std::vector<double> ticks;
  if (a.log) {
    // Decades, with 2x and 5x between them when there are few.
    const bool fine = a.hi - a.lo <= 3;
    for (double e = a.lo; e <= a.hi + 1e-9; e += 1) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if ((m == 1.0 || fine) && std::log10(v) <= a.hi + 1e-9) ticks.push_back(v);
      }
    }
    return ticks;
  }
  const double raw = (a.hi - a.lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  for (double v = std::ceil(a.lo / step) * step; v <= a.hi + 1e-9; v += step) ticks.push_back(v);
  return ticks;
}

std::vector<double> x_ticks(const PlotPanel& panel, bool log) {
  std::vector<double> ticks;
  for (const PlotSeries& s : panel.series) {
    for (const auto& p : s.points) {
      if (!(log && p.first <= 0)) ticks.push_back(p.first);
    }
  }
  std::sort(ticks.begin(), ticks.end());
  ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
  return ticks;
}

std::string render_panel(const PlotPanel& panel, double x0) {
  std::string o = fmt::format("<g transform=\"translate({},0)\">\n", x0);
  const double left = kLeft, right = kPanelWidth - kRight, top = kTop, bottom = kPanelHeight - kBottom;
  const Axis ax = make_axis(panel, true, panel.log_x, left, right);
  const Axis ay = make_axis(panel, false, panel.log_y, bottom, top, panel.y_from_zero);
  o += fmt::format("<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                   (left + right) / 2, escape(panel.title));
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", left, top,
                   right - left, bottom - top);
  for (double v : axis_ticks(ay)) {
    const double y = ay.pixel(v);
    o += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", left, y, right);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\">{}</text>\n", left - 6, y + 4,
                     tick_label(v));
  }
  for (double v : panel.x_ticks_at_points ? x_ticks(panel, ax.log) : axis_ticks(ax)) {
    const double x = ax.pixel(v);
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", x, top, bottom);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n", x, bottom + 16,
                     tick_label(v));
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n", (left + right) / 2,
                   kPanelHeight - 14, escape(panel.x_label));
  o += fmt::format(
      "<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 16 {0})\">{1}</text>\n",
      (top + bottom) / 2, escape(panel.y_label));
  for (size_t i = 0; i < panel.series.size(); ++i) {
    const PlotSeries& s = panel.series[i];
    std::string points;
    for (const auto& [x, y] : s.points) {
      if ((ax.log && x <= 0) || (ay.log && y <= 0)) continue;
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", ax.pixel(x), ay.pixel(y));
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", ax.pixel(x), ay.pixel(y),
                       escape(s.color));
    }
    o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", escape(s.color),
                     points);
    const double row = 16 * static_cast<double>(i);
    const double ly =
        panel.legend_at_bottom ? bottom - 10 - 16 * static_cast<double>(panel.series.size() - 1) + row : top + 16 + row;
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n", left + 10,
                     ly - 4, left + 30, ly - 4, escape(s.color));
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n", left + 36, ly, escape(s.name));
  }
  return o + "</g>\n";
}

}  // namespace

std::string render_svg(std::span<const PlotPanel> panels) {
  const double width = kPanelWidth * static_cast<double>(std::max<size_t>(1, panels.size()));
  std::string o = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, kPanelHeight);
  for (size_t i = 0; i < panels.size(); ++i) o += render_panel(panels[i], kPanelWidth * static_cast<double>(i));
  return o + "</svg>\n";
}

std::vector<PlotPanel> bench_panels(const BenchResults& r) {
  PlotPanel cache{.title = "Time per generated token",
                  .x_label = "context length (tokens)",
                  .y_label = "ms per token (log)",
                  .log_x = true,
                  .log_y = true,
                  .series = {{.name = "without KV cache (recompute)", .color = "#d62728", .points = {}},
                             {.name = "with KV cache", .color = "#1f77b4", .points = {}}}};
  for (const CacheFigures& c : r.cache) {
    cache.series[0].points.emplace_back(static_cast<double>(c.context), c.uncached_ms.mean);
    cache.series[1].points.emplace_back(static_cast<double>(c.context), c.cached_ms.mean);
  }
  PlotPanel decode{.title = "Decode throughput vs context depth",
                   .x_label = "tokens already in the KV cache",
                   .y_label = "tokens per second",
                   .legend_at_bottom = true,
                   .series = {{.name = "paged KV (blocks)", .color = "#1f77b4", .points = {}},
                              {.name = "contiguous KV", .color = "#ff7f0e", .points = {}}}};
  for (const DecodeFigures& d : r.decode) {
    decode.series[0].points.emplace_back(static_cast<double>(d.depth), d.paged_tok_s.mean);
    decode.series[1].points.emplace_back(static_cast<double>(d.depth), d.contiguous_tok_s.mean);
  }
  if (r.cache.empty()) return {decode};  // not measured (--weights-only)
  return {cache, decode};
}

}  // namespace kvs
