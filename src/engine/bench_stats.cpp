#include "engine/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvs {

Summary summarize(std::span<const double> values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  if (values.size() > 1) {
    double squares = 0.0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return s;
}

}  // namespace kvs
