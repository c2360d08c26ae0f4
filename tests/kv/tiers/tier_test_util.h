// Test helpers for the offload tiers: a block file I/O that fails on request (the real POSIX one
// underneath) and a log sink that keeps its lines.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kv/tiers/block_file_io.h"
#include "kv/tiers/disk_tier.h"

namespace kvs::test {

// A file system that fails on request: the real POSIX one underneath.
class FaultyIo final : public BlockFileIo {
 public:
  enum class Fault { kNone, kWriteError, kDiskFull, kReadError, kShortRead, kFlipBit };
  std::shared_ptr<BlockFileIo> real = make_posix_block_file_io();
  std::atomic<Fault> fault{Fault::kNone};

  Status write_file(const std::string& path, std::span<const std::byte> bytes) override {
    if (fault == Fault::kWriteError) return Status::io_error(fmt::format("writing {}: Input/output error", path));
    if (fault == Fault::kDiskFull) return Status::io_error(fmt::format("writing {}: No space left on device", path));
    return real->write_file(path, bytes);
  }
  Expected<size_t> read(const std::string& path, size_t offset, std::span<std::byte> out) override {
    if (fault == Fault::kReadError) return Status::io_error(fmt::format("reading {}: Input/output error", path));
    auto n = real->read(path, offset, out);
    if (n && fault == Fault::kShortRead) return *n / 2;
    if (n && fault == Fault::kFlipBit && *n > 0) out[*n - 1] ^= std::byte{0x10};
    return n;
  }
  Status remove(const std::string& path) override { return real->remove(path); }
  Expected<std::vector<BlockFileEntry>> list(const std::string& dir) override { return real->list(dir); }
};

// Keeps every line logged to its sink.
struct Logged {
  std::mutex mutex;
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  bool has(std::string_view text) {
    std::lock_guard lock(mutex);
    return std::ranges::any_of(lines, [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
};

}  // namespace kvs::test
