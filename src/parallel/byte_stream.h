// Plain-data messages between ranks: a writer that appends values and arrays of trivially copyable types,
// and a reader that takes them back in the same order (lengths as 64-bit counts). Both ends are this program
// on the same kind of machine: no byte-order conversion.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace kvs {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>& out) : out_(out) {}
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  template <typename T>
  void put_array(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(values.size());
    const size_t at = out_.size();
    out_.resize(at + values.size_bytes());
    if (!values.empty()) std::memcpy(out_.data() + at, values.data(), values.size_bytes());
  }

 private:
  std::vector<std::byte>& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    KVS_ASSERT(at_ + sizeof(T) <= in_.size(), "a message of {} bytes read past its end at {}", in_.size(), at_);
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  template <typename T>
  void get_array(std::vector<T>& out) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto n = get<uint64_t>();
    KVS_ASSERT(at_ + n * sizeof(T) <= in_.size(), "an array of {} x {} bytes past the end of a message of {}", n,
               sizeof(T), in_.size());
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  size_t at_ = 0;
};

}  // namespace kvs
