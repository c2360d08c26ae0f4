#include "kv/tiers/block_file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace kvs {
namespace {

namespace fs = std::filesystem;

Status errno_status(const std::string& what, const std::string& path, int error) {
  return Status::io_error(fmt::format("{} {}: {}", what, path, std::strerror(error)));
}

// Closes a descriptor when it goes out of scope.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

class PosixBlockFileIo final : public BlockFileIo {
 public:
  Status write_file(const std::string& path, std::span<const std::byte> bytes) override {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) return Status::io_error(fmt::format("creating the directory of {}: {}", path, ec.message()));
    const std::string tmp = fmt::format("{}.tmp{}", path, next_tmp_.fetch_add(1));
    {
      FileDescriptor file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
      if (file.fd < 0) return errno_status("opening", tmp, errno);
      for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::pwrite(file.fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          const int error = n < 0 ? errno : ENOSPC;
          ::unlink(tmp.c_str());
          return errno_status("writing", tmp, error);
        }
        done += static_cast<size_t>(n);
      }
      if (::fdatasync(file.fd) != 0) {
        const int error = errno;
        ::unlink(tmp.c_str());
        return errno_status("syncing", tmp, error);
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int error = errno;
      ::unlink(tmp.c_str());
      return errno_status("renaming into", path, error);
    }
    return Status::ok();
  }

  Expected<size_t> read(const std::string& path, size_t offset, std::span<std::byte> out) override {
    FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (file.fd < 0) return errno_status("opening", path, errno);
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(file.fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_status("reading", path, errno);
      if (n == 0) break;  // the end of the file
      done += static_cast<size_t>(n);
    }
    return done;
  }

  Status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errno_status("removing", path, errno);
    return Status::ok();
  }

  Expected<std::vector<BlockFileEntry>> list(const std::string& dir) override {
    std::vector<BlockFileEntry> files;
    std::error_code ec;
    if (!fs::exists(dir, ec)) return files;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      const auto size = it->file_size(ec);
      const auto time = it->last_write_time(ec);
      if (ec) break;
      files.push_back(
          {.path = it->path().string(),
           .size = static_cast<size_t>(size),
           .modified_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count()});
    }
    if (ec) return Status::io_error(fmt::format("listing {}: {}", dir, ec.message()));
    return files;
  }

 private:
  std::atomic<uint64_t> next_tmp_{0};
};

}  // namespace

std::unique_ptr<BlockFileIo> make_posix_block_file_io() { return std::make_unique<PosixBlockFileIo>(); }

}  // namespace kvs
