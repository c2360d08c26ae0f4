#include "bench/bench_progress.h"

#include <fmt/format.h>

namespace kvs {

void BenchProgress::step(const std::string& what) {
  ++done_;
  if (!out_) return;
  const std::string elapsed = now_ ? fmt::format(" {:.0f}s", now_() - start_) : "";
  const std::string line = fmt::format("[{}/{}{}] {}", done_, total_, elapsed, what);
  if (is_terminal_) {
    fmt::print(out_, "\r\033[K{}", line);
    line_open_ = true;
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

void BenchProgress::note(const std::string& text) {
  if (!out_) return;
  if (line_open_) fmt::print(out_, "\r\033[K");
  line_open_ = false;
  fmt::print(out_, "{}\n", text);
  std::fflush(out_);
}

void BenchProgress::finish() {
  if (!out_ || !line_open_) return;
  fmt::print(out_, "\n");
  std::fflush(out_);
  line_open_ = false;
}

}  // namespace kvs
