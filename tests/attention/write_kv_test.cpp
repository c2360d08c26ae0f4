// The KV write path in each element type: rows written in fp32 read back as their f16/bf16 roundings, in
// the [block][kv_head][slot][head_dim] layout, and the allocation is the calculator's prediction.
#include "attention/write_kv.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"

namespace kvs {
namespace {

float stored_element(const KvRows& rows, size_t i) {
  switch (rows.type) {
    case DType::kF16: return fp16_to_fp32(static_cast<const uint16_t*>(rows.data)[i]);
    case DType::kBF16: return bf16_to_fp32(static_cast<const uint16_t*>(rows.data)[i]);
    default: return static_cast<const float*>(rows.data)[i];
  }
}

float rounded(KvDType type, float v) {
  switch (type) {
    case KvDType::kF16: return fp16_to_fp32(fp32_to_fp16(v));
    case KvDType::kBF16: return bf16_to_fp32(fp32_to_bf16(v));
    default: return v;
  }
}

TEST(WriteKv, RowsReadBackAsTheirRoundingInEveryElementType) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16}) {
    const KvShape shape{
        .num_layers = 2, .num_kv_heads = 3, .head_dim = 40, .block_size = 4, .num_blocks = 5, .dtype = type};
    KvStorage kv(shape);
    EXPECT_EQ(kv.element_type(), *kv_element_type(type));
    const size_t row = shape.num_kv_heads * shape.head_dim;
    // Every slot of every layer gets its own K and V.
    std::vector<float> keys(shape.num_layers * shape.token_capacity() * row), values(keys.size());
    for (float& x : keys) x = normal(rng);
    for (float& x : values) x = normal(rng);
    for (size_t l = 0; l < shape.num_layers; ++l) {
      for (size_t s = 0; s < shape.token_capacity(); ++s) {
        const size_t at = (l * shape.token_capacity() + s) * row;
        write_kv(kv, l, KvSlot{s}, {&keys[at], row}, {&values[at], row});
      }
    }
    for (size_t l = 0; l < shape.num_layers; ++l) {
      for (size_t s = 0; s < shape.token_capacity(); ++s) {
        const BlockId block{static_cast<uint32_t>(s / shape.block_size)};
        for (size_t h = 0; h < shape.num_kv_heads; ++h) {
          const KvRows k = kv.keys(l, block, h), v = kv.values(l, block, h);
          for (size_t i = 0; i < shape.head_dim; ++i) {
            const size_t in_block = (s % shape.block_size) * shape.head_dim + i;
            const size_t src = (l * shape.token_capacity() + s) * row + h * shape.head_dim + i;
            ASSERT_EQ(stored_element(k, in_block), rounded(type, keys[src])) << kv_dtype_name(type) << " slot " << s;
            ASSERT_EQ(stored_element(v, in_block), rounded(type, values[src])) << kv_dtype_name(type) << " slot " << s;
          }
        }
      }
    }
    // The calculator's figure is the allocation: 2 bytes an element for f16 and bf16.
    EXPECT_EQ(kv.bytes(), shape.num_blocks * kv_bytes_per_block(shape.spec()).total());
    EXPECT_EQ(kv.bytes(),
              shape.num_layers * 2 * shape.num_blocks * shape.elements_per_block() * (type == KvDType::kF32 ? 4u : 2u));
  }
}

}  // namespace
}  // namespace kvs
