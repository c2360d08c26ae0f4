// The progress line of `kvserve bench`: "[3/14 12s] decode depth 512, paged, rep 2/3" (step, total,
// seconds since the start). On a terminal
// each step overwrites the last (\r); otherwise (a log, a pipe) every step is its own line.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

namespace kvs {

class BenchProgress {
 public:
  // `out` is borrowed (stderr in the CLI; nullptr shows nothing); `total_steps` is what step()
  // counts up to; `now` (monotonic seconds) times the run, or nothing when empty.
  BenchProgress(std::FILE* out, bool is_terminal, size_t total_steps, std::function<double()> now = {})
      : out_(out), is_terminal_(is_terminal), total_(total_steps), now_(std::move(now)), start_(now_ ? now_() : 0.0) {}
  ~BenchProgress() { finish(); }
  BenchProgress(const BenchProgress&) = delete;
  BenchProgress& operator=(const BenchProgress&) = delete;

  // Starts the next step.
  void step(const std::string& what);
  // A line that stays (a note, a section result), printed above the progress line.
  void note(const std::string& text);
  // Ends the progress line (a newline on a terminal). Called by the destructor too.
  void finish();

  size_t steps_done() const { return done_; }

 private:
  std::FILE* out_;
  bool is_terminal_;
  size_t total_;
  std::function<double()> now_;
  double start_;
  size_t done_ = 0;
  bool line_open_ = false;  // a \r line is on screen
};

}  // namespace kvs
