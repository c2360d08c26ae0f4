// Where the engine's time comes from: the steady clock, or in tests a clock the test moves, so that what depends on
// time (time to first token, inter-token latency, the measured prefill and copy rates preemption decides by) can be
// checked exactly.
#pragma once

#include <chrono>

namespace kvs {

using SteadyTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
};

// A clock that stands still until the test advances it.
class ManualClock final : public Clock {
 public:
  SteadyTime now() const override { return now_; }
  void advance(std::chrono::nanoseconds by) { now_ += by; }

 private:
  SteadyTime now_ = {};
};

inline double seconds_between(SteadyTime a, SteadyTime b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace kvs
