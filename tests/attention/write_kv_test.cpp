// The KV write path: rows written in fp32 read back as their f16/bf16 roundings in the element type of
// each of K and V (which may differ, in type and in width), in the [block][kv_head][slot][width] layout;
// a batch is cut into block runs so that no block is written by two runs.
#include "attention/write_kv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "kv/kv_sizing.h"
#include "tensor/kv_quant.h"

namespace kvs {
namespace {

float stored_element(const KvRows& rows, size_t i) {
  switch (rows.type) {
    case KvDType::kF16: return fp16_to_fp32(static_cast<const uint16_t*>(rows.data)[i]);
    case KvDType::kBF16: return bf16_to_fp32(static_cast<const uint16_t*>(rows.data)[i]);
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

TEST(WriteKv, RowsReadBackAsTheirRoundingInEachTensorsElementType) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const KvDTypes types[] = {
      KvDType::kF32, KvDType::kF16, KvDType::kBF16, {KvDType::kF16, KvDType::kF32}, {KvDType::kBF16, KvDType::kF16}};
  for (const KvDTypes dtype : types) {
    for (const size_t v_width : {40, 24}) {
      const KvCacheSpec spec{
          .num_layers = 2, .num_kv_heads = 3, .head_dim = 40, .v_head_dim = v_width, .dtype = dtype, .block_size = 4};
      const size_t num_blocks = 5, heads = spec.num_kv_heads;
      KvStorage kv(spec, num_blocks);
      const size_t capacity = kv.token_capacity();
      // Every slot of every layer gets its own K and V, written one whole block per run.
      std::vector<float> keys(spec.num_layers * capacity * heads * 40),
          values(spec.num_layers * capacity * heads * v_width);
      for (float& x : keys) x = normal(rng);
      for (float& x : values) x = normal(rng);
      for (size_t l = 0; l < spec.num_layers; ++l) {
        for (size_t first = 0; first < capacity; first += spec.block_size) {
          const size_t n = spec.block_size, k_at = (l * capacity + first) * heads * 40;
          const size_t v_at = (l * capacity + first) * heads * v_width;
          write_kv_run(kv, l, KvSlot{first}, n, {&keys[k_at], n * heads * 40}, {&values[v_at], n * heads * v_width});
        }
      }
      for (size_t l = 0; l < spec.num_layers; ++l) {
        for (size_t s = 0; s < capacity; ++s) {
          const BlockId block{static_cast<uint32_t>(s / spec.block_size)};
          for (size_t h = 0; h < heads; ++h) {
            const KvRows k = kv.keys(l, block, h), v = kv.values(l, block, h);
            ASSERT_EQ(k.type, dtype.k);
            ASSERT_EQ(v.type, dtype.v);
            for (size_t i = 0; i < 40; ++i) {
              const size_t src = ((l * capacity + s) * heads + h) * 40 + i;
              ASSERT_EQ(stored_element(k, (s % spec.block_size) * 40 + i), rounded(dtype.k, keys[src]))
                  << kv_dtypes_name(dtype) << " slot " << s;
            }
            for (size_t i = 0; i < v_width; ++i) {
              const size_t src = ((l * capacity + s) * heads + h) * v_width + i;
              ASSERT_EQ(stored_element(v, (s % spec.block_size) * v_width + i), rounded(dtype.v, values[src]))
                  << kv_dtypes_name(dtype) << " slot " << s;
            }
          }
        }
      }
      // The calculator's figure is the allocation: 4 bytes an f32 element, 2 an f16 or bf16 one.
      const auto bytes = [](KvDType t) { return t == KvDType::kF32 ? 4u : 2u; };
      EXPECT_EQ(kv.bytes(), num_blocks * kv_bytes_per_block(spec).total());
      EXPECT_EQ(kv.bytes(), spec.num_layers * num_blocks * spec.block_size * heads *
                                (40 * bytes(dtype.k) + v_width * bytes(dtype.v)));
    }
  }
}

// A decode batch (one token each of three sequences), then a prefill chunk that crosses two block
// boundaries: runs break at every block edge and between sequences.
TEST(WriteKv, RunsCutABatchAtBlockEdgesAndBetweenSequences) {
  const std::vector<KvSlot> decode = {{35}, {4}, {17}};
  const auto runs = kv_write_runs(decode, 16);
  ASSERT_EQ(runs.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(runs[r].first, r);
    EXPECT_EQ(runs[r].count, 1u);
  }

  // Slots 14..33 of a sequence whose blocks 0, 1, 2 are pool blocks 5, 9, 2; then a token of another one.
  std::vector<KvSlot> chunk;
  const size_t table[] = {5, 9, 2};
  for (size_t pos = 14; pos < 34; ++pos) chunk.push_back({table[pos / 16] * 16 + pos % 16});
  chunk.push_back({7 * 16 + 3});
  const auto cut = kv_write_runs(chunk, 16);
  ASSERT_EQ(cut.size(), 4u);
  // Positions 14, 15 in block 5; 16..31 in block 9; 32, 33 in block 2; the other sequence.
  const size_t want[4][2] = {{0, 2}, {2, 16}, {18, 2}, {20, 1}};
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(cut[r].first, want[r][0]) << "run " << r;
    EXPECT_EQ(cut[r].count, want[r][1]) << "run " << r;
  }

  // Consecutive slot numbers that cross a block edge are two blocks, two runs.
  const std::vector<KvSlot> edge = {{15}, {16}};
  EXPECT_EQ(kv_write_runs(edge, 16).size(), 2u);
}

TEST(WriteKvDeathTest, TwoRunsIntoOneBlockAreRefused) {
  // Two writers of block 1 in one batch would race on its bytes (and its scales, when quantized).
  const std::vector<KvSlot> slots = {{16}, {40}, {17}};
  EXPECT_DEATH(kv_write_runs(slots, 16), "block 1 is written by two runs");
}

// Keys quantized per channel: a block written in one run and the same rows written in runs of odd
// lengths through a key tail end with the same bytes (each group is quantized once, from its fp16
// rows); meanwhile the filling group's rows lie in the tail as their fp16 roundings.
TEST(WriteKv, KeysPerChannelWaitInTheirTailAndAnySplitGivesTheSameBytes) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    const KvCacheSpec spec{.num_layers = 2,
                           .num_kv_heads = 2,
                           .head_dim = 32,
                           .dtype = {type, KvDType::kF16},
                           .key_scale_axis = KvScaleAxis::kPerChannel,
                           .block_size = 64};
    const size_t heads = 2, width = 32, rows = 64, group = 16;
    KvStorage kv(spec, 2, 1);
    std::vector<float> keys(rows * heads * width), values(rows * heads * width);
    for (float& x : keys) x = normal(rng);
    for (float& x : values) x = normal(rng);
    const auto run = [&](size_t layer, size_t block, size_t first, size_t n, uint32_t tail) {
      write_kv_run(kv, layer, KvSlot{block * rows + first}, n, {&keys[first * heads * width], n * heads * width},
                   {&values[first * heads * width], n * heads * width}, tail);
    };
    for (size_t l = 0; l < 2; ++l) {
      run(l, 0, 0, rows, kNoKeyTail);  // whole groups: no tail needed
      size_t first = 0;
      for (const size_t n : {5, 1, 20, 3, 35}) {
        run(l, 1, first, n, 0);
        first += n;
        if (first == 26) {  // group 1 holds rows 16..25, in the tail
          for (size_t h = 0; h < heads; ++h) {
            const auto* tail = static_cast<const uint16_t*>(kv.key_tail_rows(0, l, h).data);
            for (size_t r = 16; r < 26; ++r)
              for (size_t i = 0; i < width; ++i)
                ASSERT_EQ(tail[(r - 16) * width + i], fp32_to_fp16(keys[(r * heads + h) * width + i]));
          }
        }
      }
      for (size_t h = 0; h < heads; ++h) {
        const KvRows whole = kv.keys(l, BlockId{0}, h), split = kv.keys(l, BlockId{1}, h);
        const size_t bytes = kv.format().k.head_block_bytes();
        EXPECT_EQ(std::memcmp(whole.data, split.data, bytes), 0)
            << kv_dtype_name(type) << " layer " << l << " head " << h;
        // And the quantized rows are within their groups' error of the keys.
        for (size_t r = 0; r < rows; ++r) {
          for (size_t i = 0; i < width; ++i) {
            const float scale = fp16_to_fp32(whole.scales[r / group * 2 * width + i]);
            const float x = fp16_to_fp32(fp32_to_fp16(keys[(r * heads + h) * width + i]));
            ASSERT_LE(std::fabs(kv_element(whole, width, r, i) - x), scale / 2 * (1 + 1e-5) + 1e-6);
          }
        }
      }
    }
  }
}

TEST(WriteKvDeathTest, AFillingGroupWithoutAKeyTailIsRefused) {
  const KvCacheSpec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 32, .dtype = KvDType::kInt8, .block_size = 16};
  KvStorage kv(spec, 1, 1);
  const std::vector<float> x(3 * 32, 1.0f);
  EXPECT_DEATH(write_kv_run(kv, 0, KvSlot{0}, 3, x, x), "a filling group needs a key tail");
}

}  // namespace
}  // namespace kvs
