// Block-quantized weights whose fp16 scales are inf or NaN (d, or dmin where the type has mins) are corrupt: a
// writer never stores one, and every value of such a block would decode to inf or NaN. Loading names the tensor,
// its type, the row, the block and the field.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "gguf/gguf.h"
#include "model/decoder_model.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

// `plain` rewritten with the fp16 field at byte `field_offset` of block `block` of tensor `tensor` set to `bits`.
std::string with_scale_bits(const test::TempDir& dir, const std::string& plain, const std::string& tensor, size_t block,
                            size_t field_offset, uint16_t bits) {
  auto file = gguf::File::open(plain);
  EXPECT_TRUE(file) << file.status().message();
  gguf::Writer w;
  for (const auto& [key, value] : file->metadata()) w.set(key, value);
  bool found = false;
  for (const gguf::TensorInfo& t : file->tensors()) {
    std::vector<std::byte> bytes(t.data.begin(), t.data.end());
    if (t.name == tensor) {
      found = true;
      std::memcpy(bytes.data() + block * dtype_block_bytes(t.type) + field_offset, &bits, sizeof bits);
    }
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.dims, std::move(bytes)));
  }
  EXPECT_TRUE(found) << tensor;
  const std::string edited = dir.file("edited.gguf");
  EXPECT_TRUE(w.write(edited));
  return edited;
}

struct BadScale {
  std::string tensor;  // of the Q4_K_M model below
  DType type;
  size_t block;         // 1 row = 1 super-block (dim 256)
  size_t field_offset;  // in the block
  uint16_t bits;
  std::string message;
};

TEST(CorruptBlocks, NonFiniteScalesAreRefusedByName) {
  test::TempDir dir("corrupt_blocks");
  const std::string plain = dir.file("plain.gguf");
  // Q4_K_M: Q4_K matrices, Q6_K for the output and the first layer's attn_v / ffn_down, and Q8_0 where a row is
  // not whole super-blocks (none at dim 256, ffn 512).
  ASSERT_TRUE(write_synth_model(
      {.layers = 2, .dim = 256, .heads = 4, .kv_heads = 2, .ffn = 512, .type = DType::kQ4_K, .mixed_k = true}, plain));
  {
    auto model = DecoderModel::load(plain);
    ASSERT_TRUE(model) << model.status().message();
  }
  const BadScale cases[] = {
      {"blk.0.attn_q.weight", DType::kQ4_K, 3, offsetof(BlockQ4_K, d), 0x7c00,
       "tensor 'blk.0.attn_q.weight' (q4_k): block 0 of row 3 has a non-finite d (fp16 bits 0x7c00)"},
      {"blk.1.ffn_up.weight", DType::kQ4_K, 7, offsetof(BlockQ4_K, dmin), 0xfe01,
       "tensor 'blk.1.ffn_up.weight' (q4_k): block 0 of row 7 has a non-finite dmin (fp16 bits 0xfe01)"},
      {"output.weight", DType::kQ6_K, 511, offsetof(BlockQ6_K, d), 0xfc00,
       "tensor 'output.weight' (q6_k): block 0 of row 511 has a non-finite d (fp16 bits 0xfc00)"},
      {"blk.1.ffn_down.weight", DType::kQ6_K, 5, offsetof(BlockQ6_K, d), 0x7e00,
       "tensor 'blk.1.ffn_down.weight' (q6_k): block 1 of row 2 has a non-finite d (fp16 bits 0x7e00)"},
  };
  for (const BadScale& c : cases) {
    SCOPED_TRACE(c.tensor);
    auto model = DecoderModel::load(with_scale_bits(dir, plain, c.tensor, c.block, c.field_offset, c.bits));
    ASSERT_FALSE(model) << "loaded a file with a non-finite scale in " << c.tensor;
    EXPECT_EQ(model.status().code(), ErrorCode::kCorrupt) << model.status().message();
    EXPECT_NE(model.status().message().find(c.message), std::string::npos) << model.status().message();
  }
  // The largest finite fp16 (65504) and a subnormal are scales a file may hold.
  for (uint16_t bits : {uint16_t{0x7bff}, uint16_t{0x0001}}) {
    auto model = DecoderModel::load(with_scale_bits(dir, plain, "blk.0.attn_k.weight", 0, 0, bits));
    EXPECT_TRUE(model) << model.status().message();
  }
}

TEST(CorruptBlocks, EveryBlockTypeChecksItsScaleFields) {
  // One block of each type, all zeros (finite), then each scale field in turn set to inf.
  for (DType type :
       {DType::kQ8_0, DType::kQ4_0, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::vector<std::byte> blocks(3 * dtype_block_bytes(type));
    EXPECT_FALSE(find_non_finite_block_scale(type, blocks));
    size_t fields = 0;
    for (size_t at = 0; at + 1 < dtype_block_bytes(type); ++at) {
      // Every byte pair of block 2 that reads as an inf in the finder is one of its fields: try them all, and
      // count the ones reported.
      std::vector<std::byte> bad = blocks;
      const uint16_t inf = 0x7c00;
      std::memcpy(bad.data() + 2 * dtype_block_bytes(type) + at, &inf, sizeof inf);
      const auto found = find_non_finite_block_scale(type, bad);
      if (!found) continue;
      ++fields;
      EXPECT_EQ(found->block, 2u);
      EXPECT_EQ(found->bits, inf);
    }
    const bool has_min = type == DType::kQ2_K || type == DType::kQ4_K || type == DType::kQ5_K;
    EXPECT_EQ(fields, has_min ? 2u : 1u);
  }
  EXPECT_FALSE(find_non_finite_block_scale(DType::kF16, std::vector<std::byte>(64, std::byte{0xff})));
}

}  // namespace
}  // namespace kvs
