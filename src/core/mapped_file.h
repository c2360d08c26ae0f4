// Read-only memory map of a whole file (RAII).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "core/status.h"

namespace kvs {

class MappedFile {
 public:
  static Expected<MappedFile> open(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // Drops this process's pages of `range` (a part of bytes()) that lie wholly inside it: the process's
  // resident memory shrinks, and a later read of them faults the file's bytes back in, unchanged. For data
  // that was copied elsewhere (weights repacked at load). Best effort: errors are ignored.
  void release(std::span<const std::byte> range) const;
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::byte* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvs
