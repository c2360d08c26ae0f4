// Corrupt GGUF files: write a valid file, damage one field, and check the reader's error names
// the file, the problem and the value. Also: every truncation and byte flips of the header.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace kvs::gguf {
namespace {

using kvs::testing::peek;
using kvs::testing::poke;
using kvs::testing::TempDir;

class GgufCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    Writer w;
    w.set_string("general.name", "corrupt-me");
    w.set_u32("key_a", 1);
    w.set_u32("key_b", 2);
    w.set_bool("flag", true);
    w.set_string_array("arr", {"x", "y"});
    ASSERT_TRUE(w.add_tensor("tensor_a", DType::kF32, {8, 2}, std::vector<std::byte>(64, std::byte{1})));
    ASSERT_TRUE(w.add_tensor("tensor_b", DType::kF16, {32}, std::vector<std::byte>(64, std::byte{2})));
    ASSERT_TRUE(w.write(path_));
    valid_ = kvs::testing::read_bytes(path_);
    ASSERT_TRUE(File::open(path_)) << "the base file must be valid";
  }

  // Offset of the first occurrence of `text` in the valid file.
  size_t at(const std::string& text) const {
    const size_t pos = valid_.find(text);
    EXPECT_NE(pos, std::string::npos) << text;
    return pos;
  }
  // Offset of the n_dims field of a tensor info (after its name).
  size_t tensor_info(const std::string& name) const { return at(name) + name.size(); }

  // Opens `bytes` as a file; returns the error message, failing the test if it opened.
  std::string error_of(const std::string& bytes) {
    kvs::testing::write_bytes(path_, bytes);
    auto file = File::open(path_);
    EXPECT_FALSE(file) << "a corrupt file opened";
    if (file) return "";
    EXPECT_EQ(file.status().code(), ErrorCode::kCorrupt) << file.status().message();
    EXPECT_NE(file.status().message().find(path_), std::string::npos) << "error does not name the file";
    return file.status().message();
  }

  TempDir dir_;
  std::string path_ = dir_.file("c.gguf");
  std::string valid_;
};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

TEST_F(GgufCorrupt, BadMagicShowsTheBytes) {
  std::string b = valid_;
  b[3] = 'X';
  const std::string m = error_of(b);
  EXPECT_CONTAINS(m, "bad magic 47 47 55 58 ('GGUX'), expected 47 47 55 46 ('GGUF')");
  EXPECT_CONTAINS(m, "(at offset 0)");
  b[0] = '\x00';
  EXPECT_CONTAINS(error_of(b), "bad magic 00 47 55 58 ('.GUX')");
}

TEST_F(GgufCorrupt, UnknownVersions) {
  std::string b = valid_;
  poke<uint32_t>(b, 4, 7);
  EXPECT_CONTAINS(error_of(b), "unsupported GGUF version 7; this reader supports versions 2 and 3 (at offset 4)");
  poke<uint32_t>(b, 4, 1);
  EXPECT_CONTAINS(error_of(b), "unsupported GGUF version 1;");
  poke<uint32_t>(b, 4, 0x03000000);
  EXPECT_CONTAINS(error_of(b), "unsupported GGUF version 50331648 (a big-endian file?)");
}

TEST_F(GgufCorrupt, ImplausibleCounts) {
  std::string b = valid_;
  poke<uint64_t>(b, 16, uint64_t{1} << 60);
  EXPECT_CONTAINS(error_of(b), "header claims 1152921504606846976 metadata entries but only");
  b = valid_;
  poke<uint64_t>(b, 8, 1000000);
  EXPECT_CONTAINS(error_of(b), "header claims 1000000 tensors but only");
}

TEST_F(GgufCorrupt, UnknownValueTypes) {
  std::string b = valid_;
  poke<uint32_t>(b, at("key_b") + 5, 13);
  EXPECT_CONTAINS(error_of(b), "unknown value type 13 for key 'key_b' (known types are 0 to 12)");
  b = valid_;
  poke<uint32_t>(b, at("arr") + 7, 99);
  EXPECT_CONTAINS(error_of(b), "unknown value type 99 for the elements of array 'arr'");
}

TEST_F(GgufCorrupt, LengthsPastTheEnd) {
  std::string b = valid_;
  const size_t name_value = at("corrupt-me") - 8;
  ASSERT_EQ(peek<uint64_t>(b, name_value), 10u);
  poke<uint64_t>(b, name_value, 5000);
  EXPECT_CONTAINS(error_of(b),
                  "string length 5000 of the string value of 'general.name' runs past the end of the file");
  EXPECT_CONTAINS(error_of(b), fmt::format("(at offset {})", name_value));
  b = valid_;
  poke<uint64_t>(b, at("key_a") - 8, ~uint64_t{0});
  EXPECT_CONTAINS(error_of(b), "string length 18446744073709551615 of metadata key #1 runs past the end");
  b = valid_;
  poke<uint64_t>(b, at("arr") + 11, uint64_t{1} << 40);
  EXPECT_CONTAINS(error_of(b), "array 'arr' of 1099511627776 string elements runs past the end of the file");
}

TEST_F(GgufCorrupt, BoolMustBeZeroOrOne) {
  std::string b = valid_;
  poke<uint8_t>(b, at("flag") + 8, 2);
  EXPECT_CONTAINS(error_of(b), "bool value 2 of 'flag' is not 0 or 1");
}

TEST_F(GgufCorrupt, DuplicateKeysAndTensorNames) {
  std::string b = valid_;
  b[at("key_b") + 4] = 'a';
  EXPECT_CONTAINS(error_of(b), "duplicate metadata key 'key_a'");
  b = valid_;
  b[at("tensor_b") + 7] = 'a';
  EXPECT_CONTAINS(error_of(b), "duplicate tensor name 'tensor_a'");
}

TEST_F(GgufCorrupt, TensorShapes) {
  const size_t a = tensor_info("tensor_a");
  ASSERT_EQ(peek<uint32_t>(valid_, a), 2u);
  std::string b = valid_;
  poke<uint32_t>(b, a, 5);
  EXPECT_CONTAINS(error_of(b), "tensor 'tensor_a' has n_dims 5; expected 1 to 4");
  poke<uint32_t>(b, a, 0);
  EXPECT_CONTAINS(error_of(b), "tensor 'tensor_a' has n_dims 0; expected 1 to 4");
  b = valid_;
  poke<uint64_t>(b, a + 12, 0);
  EXPECT_CONTAINS(error_of(b), "tensor 'tensor_a' with dims [8, 0]: dimension 1 is zero");
  b = valid_;
  poke<uint64_t>(b, a + 4, uint64_t{1} << 40);
  poke<uint64_t>(b, a + 12, uint64_t{1} << 40);
  EXPECT_CONTAINS(error_of(b),
                  "tensor 'tensor_a' with dims [1099511627776, 1099511627776]: element count "
                  "overflows 64 bits at dimension 1");
}

TEST_F(GgufCorrupt, UnknownTensorType) {
  const size_t type_at = tensor_info("tensor_a") + 20;
  ASSERT_EQ(peek<uint32_t>(valid_, type_at), 0u);
  std::string b = valid_;
  poke<uint32_t>(b, type_at, 16);  // ggml IQ2_XXS: valid in ggml, not supported here, named
  const std::string m = error_of(b);
  EXPECT_CONTAINS(
      m,
      "tensor 'tensor_a' has unsupported type iq2_xxs (id 16) (supported: 0 f32, 1 f16, 2 q4_0, 3 q4_1, "
      "6 q5_0, 7 q5_1, 8 q8_0, 10 q2_k, 11 q3_k, 12 q4_k, 13 q5_k, 14 q6_k, 20 iq4_nl, 23 iq4_xs, 30 bf16)");
  poke<uint32_t>(b, type_at, 99);
  EXPECT_CONTAINS(error_of(b), "tensor 'tensor_a' has unsupported type id 99 (supported:");
  EXPECT_CONTAINS(m, fmt::format("(at offset {})", type_at));
  // A quantized type whose row length is not a block multiple.
  poke<uint32_t>(b, type_at, 8);
  EXPECT_CONTAINS(error_of(b),
                  "tensor 'tensor_a' with dims [8, 2]: row length 8 is not a multiple of the q8_0 "
                  "block size 32");
}

TEST_F(GgufCorrupt, TensorDataOutOfBoundsOrMisaligned) {
  const size_t offset_at = tensor_info("tensor_b") + 16;
  ASSERT_EQ(peek<uint64_t>(valid_, offset_at), 64u);
  std::string b = valid_;
  poke<uint64_t>(b, offset_at, 96);
  EXPECT_CONTAINS(error_of(b), fmt::format("tensor 'tensor_b' data (offset 96 + 64 bytes, after the data section "
                                           "start {}) lies outside the file of {} bytes",
                                           valid_.size() - 128, valid_.size()));
  poke<uint64_t>(b, offset_at, ~uint64_t{0} - 31);  // offset + size overflows 64 bits
  EXPECT_CONTAINS(error_of(b), "lies outside the file");
  poke<uint64_t>(b, offset_at, 4);
  EXPECT_CONTAINS(error_of(b), "tensor 'tensor_b' data offset 4 is not a multiple of the alignment 32");
}

TEST_F(GgufCorrupt, BadAlignmentKey) {
  Writer w;
  w.set_u32("general.alignment", 32);
  ASSERT_TRUE(w.write(path_));
  const std::string valid = kvs::testing::read_bytes(path_);
  const size_t type_at = valid.find("general.alignment") + 17;  // after the 17-byte key
  std::string b = valid;
  poke<uint32_t>(b, type_at + 4, 48);
  EXPECT_CONTAINS(error_of(b), "general.alignment must be a power of two, got 48");
  b = valid;
  poke<uint32_t>(b, type_at, 10);  // uint64: the value now takes 4 bytes of the zero padding too
  EXPECT_CONTAINS(error_of(b), "general.alignment must be a uint32, got a uint64");
}

TEST_F(GgufCorrupt, NestingDepthIsBounded) {
  const auto nested = [](int levels) {
    Value v = Value::of(Array{.element_type = ValueType::kUint8, .items = {Value::of(uint8_t{1})}});
    for (int i = 1; i < levels; ++i) v = Value::of(Array{.element_type = ValueType::kArray, .items = {v}});
    return v;
  };
  Writer ok;
  ok.set("deep", nested(8));
  ASSERT_TRUE(ok.write(path_));
  EXPECT_TRUE(File::open(path_));
  Writer too_deep;
  too_deep.set("deep", nested(9));
  ASSERT_TRUE(too_deep.write(path_));
  auto file = File::open(path_);
  ASSERT_FALSE(file);
  EXPECT_CONTAINS(file.status().message(), "arrays in 'deep' are nested deeper than 8 levels");
}

TEST_F(GgufCorrupt, EveryTruncationFails) {
  EXPECT_CONTAINS(error_of(""), "truncated file: the magic needs 4 bytes but only 0 remain of 0");
  EXPECT_CONTAINS(error_of(valid_.substr(0, 10)), "truncated file: the tensor count needs 8 bytes but only 2 remain");
  const size_t key_b = at("key_b");
  EXPECT_CONTAINS(error_of(valid_.substr(0, key_b + 7)), "truncated file: the value type of 'key_b' needs 4 bytes");
  EXPECT_CONTAINS(error_of(valid_.substr(0, valid_.size() - 1)), "tensor 'tensor_b' data");
  for (size_t length = 0; length < valid_.size(); ++length) {
    kvs::testing::write_bytes(path_, valid_.substr(0, length));
    auto file = File::open(path_);
    ASSERT_FALSE(file) << "truncated to " << length << " bytes, the file still opened";
    ASSERT_EQ(file.status().code(), ErrorCode::kCorrupt) << file.status().message();
  }
}

// A cheap deterministic fuzz: flip bits in every header byte; the reader must return (ASan/UBSan
// builds check it never reads out of bounds), and any failure must be a kCorrupt status.
TEST_F(GgufCorrupt, HeaderByteFlipsNeverCrash) {
  auto valid_file = File::open(path_);
  ASSERT_TRUE(valid_file);
  const size_t header = valid_file->data_offset();
  int opened = 0;
  for (size_t i = 0; i < header; ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::string b = valid_;
      b[i] = static_cast<char>(b[i] ^ flip);
      kvs::testing::write_bytes(path_, b);
      auto file = File::open(path_);
      if (file) {
        ++opened;
        for (const auto& t : file->tensors()) ASSERT_LE(file->data_offset() + t.offset + t.data.size(), b.size());
      } else {
        ASSERT_EQ(file.status().code(), ErrorCode::kCorrupt) << "byte " << i << ": " << file.status().message();
      }
    }
  }
  EXPECT_GT(opened, 0);  // e.g. flips inside string contents or data padding still parse
}

// A count the file could hold (it has the bytes) but that would cost ~48 bytes of memory per item.
TEST(GgufLimits, HugeArrayIsRefusedBeforeAllocating) {
  TempDir dir;
  const uint64_t count = (uint64_t{1} << 25) + 1;
  std::string b = "GGUF";
  const auto put = [&b](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{3});
  put(uint64_t{0});  // tensors
  put(uint64_t{1});  // metadata entries
  put(uint64_t{3});
  b += "big";
  put(uint32_t{9});  // array
  put(uint32_t{0});  // of uint8
  put(count);
  b.append(count, '\0');
  const std::string path = dir.file("big.gguf");
  kvs::testing::write_bytes(path, b);
  auto file = File::open(path);
  ASSERT_FALSE(file);
  EXPECT_CONTAINS(file.status().message(),
                  "array 'big' of 33554433 elements exceeds the limit of 33554432 array items in all metadata");
}

TEST(GgufOpen, MissingFileIsNotFound) {
  auto file = File::open("/nonexistent/model.gguf");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(file.status().message(), "file '/nonexistent/model.gguf' does not exist");
}

}  // namespace
}  // namespace kvs::gguf
