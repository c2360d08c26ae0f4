#include "kv/kv_allocator.h"

namespace kvs {
namespace {

class HostRegion final : public KvRegion {
 public:
  explicit HostRegion(size_t bytes) : buffer_(bytes, PageHint::kHuge) {}
  std::span<std::byte> bytes() override { return buffer_.span(); }

 private:
  AlignedBuffer<std::byte> buffer_;
};

}  // namespace

std::unique_ptr<KvRegion> HostKvAllocator::allocate(size_t bytes) { return std::make_unique<HostRegion>(bytes); }

}  // namespace kvs
