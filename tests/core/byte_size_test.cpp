#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

TEST(ByteSize, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(*parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(*parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(*parse_byte_size("1.5GB"), 1'500'000'000u);
  EXPECT_EQ(*parse_byte_size("4096"), 4096u);
  auto bad = parse_byte_size("12 parsecs");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("parsecs"), std::string::npos);
  EXPECT_FALSE(parse_byte_size("GiB"));
}

}  // namespace
}  // namespace kvs
