// Summaries of repeated measurements for `kvserve bench`: mean and spread, so every figure the
// benchmark reports says how much it moved between repetitions.
#pragma once

#include <cstddef>
#include <span>

namespace kvs {

struct Summary {
  size_t count = 0;
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation (n - 1); 0 for fewer than two values
  double min = 0.0;
  double max = 0.0;

  // stddev / mean: the spread as a fraction of the value; 0 when the mean is 0.
  double relative_spread() const { return mean != 0.0 ? stddev / mean : 0.0; }
};

// Summary of `values`; all zero when empty.
Summary summarize(std::span<const double> values);

// The middle value (the mean of the two middle ones for an even count); 0 when empty. Robust to
// the few steps a noisy host stalls, where the mean is not.
double median(std::span<const double> values);

}  // namespace kvs
