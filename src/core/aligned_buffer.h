// A heap array of trivially copyable T, 64-byte aligned for SIMD loads, zero-initialised.
// PageHint::kHuge asks the kernel for 2 MiB pages (transparent huge pages, madvise) for a large buffer
// that is streamed as a whole, such as packed weights: 512x fewer page faults when it is first touched and
// fewer TLB misses when it is read. The kernel may still hand out 4 KiB pages; nothing else changes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace kvs {

enum class PageHint { kDefault, kHuge };

template <class T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count, PageHint hint = PageHint::kDefault) : size_(count) {
    if (count == 0) return;
    const bool huge = hint == PageHint::kHuge && count * sizeof(T) >= kHugePage;
    const size_t align = huge ? kHugePage : kAlignment;
    const size_t bytes = (count * sizeof(T) + align - 1) / align * align;
    data_ = static_cast<T*>(std::aligned_alloc(align, bytes));
    if (!data_) throw std::bad_alloc();
    if (huge) ::madvise(static_cast<void*>(data_), bytes, MADV_HUGEPAGE);  // before the first touch
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }

  // Holds at least `count` elements: reallocated (zeroed, contents lost) only when smaller.
  void ensure_size(size_t count) {
    if (size_ < count) *this = AlignedBuffer(count);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvs
