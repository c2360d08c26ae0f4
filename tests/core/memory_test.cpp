// AlignedBuffer's page hint and MappedFile::release: memory behaviours the weights and the KV pool rely on.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/mapped_file.h"
#include "test_support.h"

namespace kvs {
namespace {

TEST(AlignedBuffer, HugeHintAlignsLargeBuffersToTwoMebibytesAndZeroFills) {
  const size_t count = (size_t{3} << 20) + 5;  // 3 MiB and a bit: rounded up inside, size() as asked
  AlignedBuffer<std::byte> huge(count, PageHint::kHuge);
  ASSERT_EQ(huge.size(), count);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge.data()) % AlignedBuffer<std::byte>::kHugePage, 0u);
  for (size_t i = 0; i < count; i += 4093) ASSERT_EQ(huge[i], std::byte{0}) << i;
  EXPECT_EQ(huge[count - 1], std::byte{0});
  huge[count - 1] = std::byte{7};
  EXPECT_EQ(huge[count - 1], std::byte{7});
  // Small buffers ignore the hint: the usual 64-byte alignment.
  AlignedBuffer<float> small(10, PageHint::kHuge);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % AlignedBuffer<float>::kAlignment, 0u);
  EXPECT_EQ(small[9], 0.0f);
}

TEST(MappedFile, ReleasedPagesReadBackUnchanged) {
  test::TempDir dir("mapped_release");
  const std::string path = dir.file("data.bin");
  std::vector<uint8_t> pattern(5 * 4096 + 123);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 131 + 7);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(pattern.data()), pattern.size());

  auto file = MappedFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  const auto bytes = file->bytes();
  ASSERT_EQ(bytes.size(), pattern.size());
  uint64_t before = 0;
  for (std::byte b : bytes) before += static_cast<uint8_t>(b);
  file->release(bytes.subspan(100, 3 * 4096 + 50));  // unaligned ends: only whole pages inside go
  file->release(bytes);
  file->release({});  // nothing
  for (size_t i = 0; i < pattern.size(); ++i) ASSERT_EQ(static_cast<uint8_t>(bytes[i]), pattern[i]) << i;
  uint64_t after = 0;
  for (std::byte b : bytes) after += static_cast<uint8_t>(b);
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace kvs
