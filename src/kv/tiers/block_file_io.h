// The disk tier's file operations, behind an interface so that tests can inject faults (read and
// write errors, short reads, a full disk, flipped bits) into the real tier; PosixBlockFileIo is the one
// the engine uses: positional reads, and whole files written to a temporary name, synced and renamed
// into place, so a crash or a failed write never leaves a partial block file under a block's name.
// Thread-safe: the disk tier calls it from its I/O thread and from the engine thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvs {

struct BlockFileEntry {
  std::string path;
  size_t size = 0;
  int64_t modified_ns = 0;  // last modification, for the LRU order a restarted tier begins with
};

class BlockFileIo {
 public:
  virtual ~BlockFileIo() = default;
  // Writes the whole file atomically (all of `bytes`, or no file under `path`); creates its directory.
  virtual Status write_file(const std::string& path, std::span<const std::byte> bytes) = 0;
  // Reads up to out.size() bytes at `offset`; returns how many were read (fewer at the end of the file).
  virtual Expected<size_t> read(const std::string& path, size_t offset, std::span<std::byte> out) = 0;
  virtual Status remove(const std::string& path) = 0;
  // Regular files under `dir`, recursively; empty when it does not exist.
  virtual Expected<std::vector<BlockFileEntry>> list(const std::string& dir) = 0;
};

std::unique_ptr<BlockFileIo> make_posix_block_file_io();

}  // namespace kvs
