// Writer -> reader round trips: every metadata value type, every tensor type, alignment, order.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace kvs::gguf {
namespace {

using kvs::testing::TempDir;

Array array_of(ValueType type, std::vector<Value> items) {
  return Array{.element_type = type, .items = std::move(items)};
}

TEST(GgufRoundTrip, EveryValueTypeSurvives) {
  TempDir dir;
  Writer w;
  w.set("u8", Value::of(uint8_t{255}));
  w.set("i8", Value::of(int8_t{-128}));
  w.set("u16", Value::of(uint16_t{65535}));
  w.set("i16", Value::of(int16_t{-32768}));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_f32("f32", 1.5f);
  w.set_bool("bool_true", true);
  w.set_bool("bool_false", false);
  w.set_string("str", "h\xc3\xa9llo\n");
  w.set_string("empty_str", "");
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set("i64", Value::of(std::numeric_limits<int64_t>::min()));
  w.set("f64", Value::of(-0.125));
  w.set("arr_u8", Value::of(array_of(ValueType::kUint8, {Value::of(uint8_t{1}), Value::of(uint8_t{2})})));
  w.set("arr_empty", Value::of(array_of(ValueType::kFloat64, {})));
  w.set_string_array("arr_str", {"a", "", "ccc"});
  const float floats[] = {0.5f, -2.0f, 1e-30f};
  w.set_f32_array("arr_f32", floats);
  const int32_t ints[] = {1, -1, 7};
  w.set_i32_array("arr_i32", ints);
  w.set("arr_bool", Value::of(array_of(ValueType::kBool, {Value::of(true), Value::of(false)})));
  Array inner1 = array_of(ValueType::kInt16, {Value::of(int16_t{-3}), Value::of(int16_t{4})});
  Array inner2 = array_of(ValueType::kString, {Value::of("x")});
  w.set("nested", Value::of(array_of(ValueType::kArray, {Value::of(inner1), Value::of(inner2)})));
  const std::string path = dir.file("values.gguf");
  ASSERT_TRUE(w.write(path)) << "write failed";

  auto file = File::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->metadata().size(), 21u);
  EXPECT_EQ(file->tensors().size(), 0u);
  EXPECT_EQ(file->find("u8")->type, ValueType::kUint8);
  EXPECT_EQ(file->get_int("u8"), 255);
  EXPECT_EQ(file->get_int("i8"), -128);
  EXPECT_EQ(file->get_int("u16"), 65535);
  EXPECT_EQ(file->get_int("i16"), -32768);
  EXPECT_EQ(file->get_int("u32"), 4000000000);
  EXPECT_EQ(file->find("u32")->type, ValueType::kUint32);
  EXPECT_EQ(file->get_int("i32"), -2000000000);
  EXPECT_EQ(file->get_float("f32"), 1.5);
  EXPECT_EQ(file->find("f32")->type, ValueType::kFloat32);
  EXPECT_EQ(file->get_bool("bool_true"), true);
  EXPECT_EQ(file->get_bool("bool_false"), false);
  EXPECT_EQ(file->get_string("str"), "h\xc3\xa9llo\n");
  EXPECT_EQ(file->get_string("empty_str"), "");
  EXPECT_EQ(file->get_int("u64"), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(std::get<uint64_t>(file->find("u64")->data), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(file->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(file->get_float("f64"), -0.125);
  EXPECT_EQ(file->find("f64")->type, ValueType::kFloat64);
  // Wrong-kind getters return nothing rather than converting.
  EXPECT_EQ(file->get_string("u8"), std::nullopt);
  EXPECT_EQ(file->get_bool("u8"), std::nullopt);
  EXPECT_EQ(file->get_int("str"), std::nullopt);
  EXPECT_EQ(file->get_array("str"), nullptr);
  EXPECT_EQ(file->find("missing"), nullptr);

  const Array* u8s = file->get_array("arr_u8");
  ASSERT_NE(u8s, nullptr);
  EXPECT_EQ(u8s->element_type, ValueType::kUint8);
  ASSERT_EQ(u8s->items.size(), 2u);
  EXPECT_EQ(u8s->items[1].as_int(), 2);
  EXPECT_EQ(file->get_array("arr_empty")->element_type, ValueType::kFloat64);
  EXPECT_TRUE(file->get_array("arr_empty")->items.empty());
  const Array* strs = file->get_array("arr_str");
  ASSERT_EQ(strs->items.size(), 3u);
  EXPECT_EQ(*strs->items[2].as_string(), "ccc");
  EXPECT_EQ(*strs->items[1].as_string(), "");
  const Array* f32s = file->get_array("arr_f32");
  ASSERT_EQ(f32s->items.size(), 3u);
  EXPECT_EQ(std::get<float>(f32s->items[2].data), 1e-30f);
  EXPECT_EQ(file->get_array("arr_i32")->items[1].as_int(), -1);
  EXPECT_EQ(file->get_array("arr_bool")->items[0].as_bool(), true);
  const Array* nested = file->get_array("nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->element_type, ValueType::kArray);
  ASSERT_EQ(nested->items.size(), 2u);
  EXPECT_EQ(nested->items[0].as_array()->element_type, ValueType::kInt16);
  EXPECT_EQ(nested->items[0].as_array()->items[0].as_int(), -3);
  EXPECT_EQ(*nested->items[1].as_array()->items[0].as_string(), "x");
}

TEST(GgufRoundTrip, MetadataKeepsInsertionOrderAndSetReplacesInPlace) {
  TempDir dir;
  Writer w;
  w.set_u32("zeta", 1);
  w.set_u32("alpha", 2);
  w.set_u32("zeta", 3);  // replaces, stays first
  const std::string path = dir.file("order.gguf");
  ASSERT_TRUE(w.write(path));
  const std::string bytes = kvs::testing::read_bytes(path);
  // Header (24 bytes), then key "zeta": u64 length 4, the text, u32 type 4, u32 value 3.
  EXPECT_EQ(kvs::testing::peek<uint64_t>(bytes, 24), 4u);
  EXPECT_EQ(bytes.substr(32, 4), "zeta");
  EXPECT_EQ(kvs::testing::peek<uint32_t>(bytes, 40), 3u);
  EXPECT_LT(bytes.find("zeta"), bytes.find("alpha"));
  auto file = File::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->metadata().size(), 2u);
  EXPECT_EQ(file->get_int("zeta"), 3);
}

// Deterministic bytes of the right size for `elements` values of `type` (the file format does not
// care what the bytes mean; codecs are tested in tests/tensor).
std::vector<std::byte> tensor_bytes(DType type, size_t elements, uint8_t salt = 0) {
  std::vector<std::byte> bytes(dtype_row_bytes(type, elements));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 131 + salt * 7 + 17) & 0xff);
  return bytes;
}

TEST(GgufRoundTrip, EveryTensorTypeKeepsItsBytesAndAlignment) {
  TempDir dir;
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0};
  Writer w;
  w.set_string("general.architecture", "test");
  for (DType type : types) {
    ASSERT_TRUE(w.add_tensor(std::string(dtype_name(type)), type, {64, 3},
                             tensor_bytes(type, 64 * 3, static_cast<uint8_t>(type))));
  }
  // A 1-D tensor whose size (5 floats = 20 bytes) forces padding before the next tensor.
  ASSERT_TRUE(w.add_tensor("odd", DType::kF32, {5}, tensor_bytes(DType::kF32, 5)));
  ASSERT_TRUE(w.add_tensor("after_odd", DType::kF16, {2, 1, 1, 2}, tensor_bytes(DType::kF16, 4)));
  const std::string path = dir.file("tensors.gguf");
  ASSERT_TRUE(w.write(path));

  auto file = File::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->data_offset() % 32, 0u);
  ASSERT_EQ(file->tensors().size(), 7u);
  for (DType type : types) {
    SCOPED_TRACE(dtype_name(type));
    const TensorInfo* t = file->find_tensor(dtype_name(type));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, type);
    EXPECT_EQ(t->dims, (std::vector<uint64_t>{64, 3}));
    EXPECT_EQ(t->num_elements(), 192u);
    EXPECT_EQ(t->offset % 32, 0u);
    const auto expected = tensor_bytes(type, 64 * 3, static_cast<uint8_t>(type));
    ASSERT_EQ(t->data.size(), expected.size());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), t->data.begin()));
  }
  EXPECT_EQ(file->find_tensor("f32")->offset, 0u);
  EXPECT_EQ(file->find_tensor("f16")->offset, 768u);  // 192 * 4
  const TensorInfo* odd = file->find_tensor("odd");
  const TensorInfo* after = file->find_tensor("after_odd");
  EXPECT_EQ(after->offset, odd->offset + 32);  // 20 bytes padded to 32
  EXPECT_EQ(after->dims, (std::vector<uint64_t>{2, 1, 1, 2}));
  EXPECT_EQ(file->find_tensor("missing"), nullptr);
  // The file ends right after the last tensor, padded to the alignment.
  EXPECT_EQ(kvs::testing::read_bytes(path).size(), file->data_offset() + after->offset + 32);
}

TEST(GgufRoundTrip, CustomAlignmentAndStreamedTensors) {
  TempDir dir;
  Writer w;
  w.set_u32("general.alignment", 64);
  ASSERT_TRUE(w.add_tensor("held", DType::kF32, {3}, tensor_bytes(DType::kF32, 3)));
  int calls = 0;
  ASSERT_TRUE(w.add_tensor_streamed("streamed", DType::kQ8_0, {32, 2}, [&](std::span<std::byte> out) {
    ++calls;
    EXPECT_EQ(out.size(), 68u);
    const auto bytes = tensor_bytes(DType::kQ8_0, 64);
    std::copy(bytes.begin(), bytes.end(), out.begin());
    return Status::ok();
  }));
  EXPECT_EQ(calls, 0);  // nothing runs until write()
  const std::string path = dir.file("aligned.gguf");
  ASSERT_TRUE(w.write(path));
  EXPECT_EQ(calls, 1);
  auto file = File::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  const TensorInfo* s = file->find_tensor("streamed");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->offset, 64u);
  const auto expected = tensor_bytes(DType::kQ8_0, 64);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), s->data.begin()));
}

TEST(GgufRoundTrip, VersionTwoIsAccepted) {
  TempDir dir;
  Writer w;
  w.set_u32("k", 9);
  ASSERT_TRUE(w.add_tensor("t", DType::kF32, {2}, tensor_bytes(DType::kF32, 2)));
  const std::string path = dir.file("v2.gguf");
  ASSERT_TRUE(w.write(path));
  std::string bytes = kvs::testing::read_bytes(path);
  kvs::testing::poke<uint32_t>(bytes, 4, 2);
  kvs::testing::write_bytes(path, bytes);
  auto file = File::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(file->get_int("k"), 9);
}

TEST(GgufWriter, RejectsBadTensorsAndValues) {
  TempDir dir;
  Writer w;
  Status s = w.add_tensor("short", DType::kF32, {4}, std::vector<std::byte>(15));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "tensor 'short' (f32 [4]) needs 16 bytes, got 15");
  s = w.add_tensor("q", DType::kQ8_0, {33}, std::vector<std::byte>(34));
  EXPECT_EQ(s.message(), "tensor 'q' with dims [33]: row length 33 is not a multiple of the q8_0 block size 32");
  s = w.add_tensor("zero", DType::kF32, {4, 0}, {});
  EXPECT_EQ(s.message(), "tensor 'zero' with dims [4, 0]: dimension 1 is zero");
  s = w.add_tensor("five", DType::kF32, {1, 1, 1, 1, 1}, std::vector<std::byte>(4));
  EXPECT_EQ(s.message(), "tensor 'five' with dims [1, 1, 1, 1, 1]: tensor has 5 dimensions; GGUF allows 1 to 4");
  ASSERT_TRUE(w.add_tensor("t", DType::kF32, {1}, std::vector<std::byte>(4)));
  s = w.add_tensor("t", DType::kF32, {1}, std::vector<std::byte>(4));
  EXPECT_EQ(s.message(), "duplicate tensor name 't'");
  EXPECT_EQ(w.add_tensor_streamed("nofill", DType::kF32, {1}, nullptr).message(),
            "tensor 'nofill' has no fill function");
  EXPECT_EQ(w.num_tensors(), 1u);

  Writer bad_value;
  bad_value.set("k", Value{.type = ValueType::kUint32, .data = std::string("x")});
  s = bad_value.write(dir.file("bad.gguf"));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("metadata 'k' is declared uint32 but holds a string"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf.tmp")));

  Writer bad_item;
  bad_item.set("a", Value::of(array_of(ValueType::kUint8, {Value::of(uint8_t{1}), Value::of(1.0f)})));
  s = bad_item.write(dir.file("bad_item.gguf"));
  EXPECT_NE(s.message().find("metadata 'a': item 1 is a float32 in an array of uint8"), std::string::npos)
      << s.message();

  Writer bad_align;
  bad_align.set_u32("general.alignment", 48);
  s = bad_align.write(dir.file("bad_align.gguf"));
  EXPECT_NE(s.message().find("general.alignment must be a uint32 power of two, got uint32 48"), std::string::npos)
      << s.message();

  Writer fails;
  ASSERT_TRUE(fails.add_tensor_streamed("f", DType::kF32, {1},
                                        [](std::span<std::byte>) { return Status::io_error("source gone"); }));
  s = fails.write(dir.file("fails.gguf"));
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_NE(s.message().find("writing tensor 'f'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("source gone"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.file("fails.gguf.tmp")));

  s = Writer().write(dir.file("no/such/dir.gguf"));
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_NE(s.message().find("cannot create"), std::string::npos) << s.message();
}

TEST(GgufTensorBytes, SizesAndOverflow) {
  const uint64_t dims_q4[] = {64, 10};
  EXPECT_EQ(*tensor_data_bytes(DType::kQ4_0, dims_q4), 2u * 18 * 10);
  const uint64_t dims_bf16[] = {3, 5, 7};
  EXPECT_EQ(*tensor_data_bytes(DType::kBF16, dims_bf16), 3u * 5 * 7 * 2);
  const uint64_t huge[] = {1ull << 32, 1ull << 32};
  EXPECT_EQ(tensor_data_bytes(DType::kF32, huge).status().message(),
            "element count overflows 64 bits at dimension 1 (4294967296)");
  const uint64_t big_bytes[] = {1ull << 62};
  EXPECT_EQ(tensor_data_bytes(DType::kF32, big_bytes).status().message(),
            "byte size of 4611686018427387904 f32 elements overflows");
}

}  // namespace
}  // namespace kvs::gguf
