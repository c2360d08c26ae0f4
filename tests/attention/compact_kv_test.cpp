// Compaction of a sequence's cache (attention/compact_kv.h) in every element type that moves a row at a
// time: each kept row lands at its index in the kept set, its value (row and per-token scales) bit for bit,
// its key bit for bit when keys carry no position, and otherwise the stored key re-rotated by the distance it
// moved: within one fp32 rotation's rounding of RoPE applied to the original (fp32 keys; 2 ulp of values below
// 1 in magnitude, so 1e-6), and within one rounding of the element type after that (f16: 2^-11 relative,
// int8: half a quantization step of the row's range, 2.8/255/2 for rotated pairs of values in [-1, 1]; stored
// Hadamard-rotated, that error is made in the rotated domain, where the range is about 3, and H spreads it
// over the row: up to sqrt(head_dim) = 4 times the element's).
#include "attention/compact_kv.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "attention/write_kv.h"
#include "tensor/kv_quant.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

struct Case {
  KvDType k, v;
  bool rotate_keys = false;
  double tolerance;  // |re-rotated key - RoPE(original key, delta)|, per element
};

struct Cache {
  KvCacheSpec spec;
  KvStorage kv;
  std::vector<BlockId> blocks;
  Cache(const Case& c, size_t layers, size_t heads, size_t head_dim, size_t block_size, size_t num_blocks)
      : spec{.num_layers = layers,
             .num_kv_heads = heads,
             .head_dim = head_dim,
             .dtype = {c.k, c.v},
             .key_scale_axis = KvScaleAxis::kPerToken,
             .rotate_keys = c.rotate_keys,
             .block_size = block_size},
        kv(spec, num_blocks) {
    // The sequence's blocks, scattered through the pool (7 is prime to the pool sizes used).
    for (size_t b = 0; b < num_blocks; ++b) blocks.push_back(BlockId{static_cast<uint32_t>((b * 7 + 3) % num_blocks)});
  }
  KvSlot slot(size_t s) const {
    return KvSlot{blocks[s / spec.block_size].value * spec.block_size + s % spec.block_size};
  }
  // The bytes of one row and its scales (values: every bit that must survive).
  std::vector<std::byte> value_bytes(size_t layer, size_t s, size_t h) {
    const KvTensorFormat& f = *kv.format().v;
    const std::byte* block = kv.value_head_block(layer, blocks[s / spec.block_size], h);
    const size_t row = s % spec.block_size;
    std::vector<std::byte> out(block + row * f.row_bytes(), block + (row + 1) * f.row_bytes());
    if (f.scale_axis == KvScaleAxis::kPerToken) {
      const size_t pair = 2 * (f.width / f.group_size) * 2;
      out.insert(out.end(), block + f.data_bytes() + row * pair, block + f.data_bytes() + (row + 1) * pair);
    }
    return out;
  }
  std::vector<float> key(size_t layer, size_t s, size_t h) const {
    const KvRows rows = kv.keys(layer, blocks[s / spec.block_size], h);
    std::vector<float> out(spec.head_dim);
    for (size_t i = 0; i < out.size(); ++i) out[i] = kv_element(rows, spec.head_dim, s % spec.block_size, i);
    if (kv.format().k.rotated) hadamard_transform(out.data(), out.size());
    return out;
  }
};

TEST(CompactKv, KeptRowsMoveToTheFrontWithValuesBitForBitAndKeysReRotated) {
  const size_t layers = 2, heads = 2, hd = 16, bs = 4, slots = 40;
  const KeyRotation rope{.inv_freq = rope_inverse_frequencies(hd, 10000.0f), .neox = false};
  const KeyRotation neox{.inv_freq = rope_inverse_frequencies(hd, 10000.0f), .neox = true};
  for (const Case& c :
       {Case{KvDType::kF32, KvDType::kF32, false, 1e-6}, Case{KvDType::kF16, KvDType::kF16, false, 2e-3},
        Case{KvDType::kBF16, KvDType::kBF16, false, 1.6e-2}, Case{KvDType::kInt8, KvDType::kInt8, false, 8e-3},
        Case{KvDType::kInt8, KvDType::kInt4, true, 3e-2}, Case{KvDType::kInt4, KvDType::kInt4, false, 0.14}}) {
    for (const KeyRotation* rotation : {static_cast<const KeyRotation*>(nullptr), &rope, &neox}) {
      const std::string what =
          fmt::format("K {} V {}{}, {}", kv_dtype_name(c.k), kv_dtype_name(c.v), c.rotate_keys ? " rotated" : "",
                      rotation == nullptr ? "no RoPE"
                      : rotation->neox    ? "NeoX"
                                          : "interleaved");
      Cache cache(c, layers, heads, hd, bs, slots / bs);
      std::mt19937 rng(11);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> k(heads * hd), v(heads * hd);
      for (size_t l = 0; l < layers; ++l) {
        for (size_t s = 0; s < slots; ++s) {
          for (auto& x : k) x = u(rng);
          for (auto& x : v) x = u(rng);
          write_kv_run(cache.kv, l, cache.slot(s), 1, k, v);
        }
      }
      // Before: every row's value bytes and key (as stored, read back to fp32).
      std::vector<std::vector<std::byte>> values_before;
      std::vector<std::vector<float>> keys_before;
      for (size_t l = 0; l < layers; ++l)
        for (size_t h = 0; h < heads; ++h)
          for (size_t s = 0; s < slots; ++s) {
            values_before.push_back(cache.value_bytes(l, s, h));
            keys_before.push_back(cache.key(l, s, h));
          }
      // Each row keeps its own random 22 slots (always some sinks in place).
      std::vector<std::vector<uint32_t>> kept(layers * heads);
      for (auto& row : kept) {
        std::vector<uint32_t> all(slots - 3);
        std::iota(all.begin(), all.end(), 3u);
        std::shuffle(all.begin(), all.end(), rng);
        row = {0, 1, 2};
        row.insert(row.end(), all.begin(), all.begin() + 19);
        std::sort(row.begin(), row.end());
      }
      static const KeyRotation none{};
      compact_kv(cache.kv, cache.blocks, kept, rotation ? *rotation : none);
      double worst = 0;
      for (size_t l = 0; l < layers; ++l) {
        for (size_t h = 0; h < heads; ++h) {
          const std::vector<uint32_t>& row = kept[l * heads + h];
          for (size_t j = 0; j < row.size(); ++j) {
            const size_t before = (l * heads + h) * slots + row[j];
            EXPECT_EQ(cache.value_bytes(l, j, h), values_before[before]) << what << " value of slot " << row[j];
            std::vector<float> want = keys_before[before];
            if (rotation) shift_key(want, static_cast<long>(j) - static_cast<long>(row[j]), *rotation);
            const std::vector<float> got = cache.key(l, j, h);
            if (!rotation || row[j] == j) {
              EXPECT_EQ(std::memcmp(got.data(), keys_before[before].data(), hd * sizeof(float)), 0)
                  << what << ": key of slot " << row[j] << " changed";
            }
            for (size_t i = 0; i < hd; ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
          }
        }
      }
      EXPECT_LE(worst, c.tolerance) << what;
    }
  }
}

// A shift and its inverse compose to the identity (RoPE rotations compose), and NeoX rotates other pairs.
TEST(CompactKv, ShiftKeyComposes) {
  const KeyRotation rope{.inv_freq = rope_inverse_frequencies(8, 10000.0f)};
  std::vector<float> x{0.5f, -0.25f, 1.0f, 0.75f, -1.0f, 0.125f, 0.3f, -0.6f}, y = x;
  shift_key(y, 37, rope);
  EXPECT_GT(std::fabs(y[0] - x[0]), 0.01f);
  shift_key(y, -37, rope);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-6f);
  std::vector<float> a = x, b = x;
  shift_key(a, 5, rope);
  shift_key(a, 7, rope);
  shift_key(b, 12, rope);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6f);
}

}  // namespace
}  // namespace kvs
