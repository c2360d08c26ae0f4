// The KV write and paged attention shaders against the CPU's: the bytes the KV write stores are the host KvStorage's
// (the same layout and the same rounding: blocks move between device, host tier and disk byte for byte), and paged
// attention over a mixed batch (a decode token over scattered blocks, a prefill chunk, a context with a hole; GQA;
// block sizes 1, 4 and 16; f32, f16 and bf16 K/V) equals BatchAttention, the CPU's fp32 path.
//
// Attention's bound, from the arithmetic (u = 2^-24): a score is an fp32 dot product of head_dim terms summed in
// another order on either side, off by E <= 2 head_dim u scale sum_i |q_i k_i|; the softmax turns a score error E into
// a probability factor within e^(+-2E); Vulkan's exp is within (3 + 2|x|) 2^-23 relative and the CPU's within 2e-7;
// the output sums over the visible slots in fp32 (2 (slots + 2) u): |out - want| <= (e^(2E) - 1 + 2 exp error +
// 2 (slots + 2) u) sum_s p_s |v_s| + 1e-7, each factor computed from the data in double.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "attention/batch_attention.h"
#include "attention/write_kv.h"
#include "core/half.h"
#include "gpu_test_fixture.h"

namespace kvs {
namespace {

constexpr double kU = 0x1p-24;
constexpr uint32_t kHole = 0xffffffffu;

class GpuAttentionTest : public test::GpuTest {
 protected:
  std::mt19937 rng_{21};
};

// Layer 0's K (or V) pool of `kv` as one buffer, [block][kv_head] head-blocks back to back: the device layout.
std::vector<std::byte> pool_bytes(const KvStorage& kv, bool keys) {
  const KvTensorFormat& f = keys ? kv.format().k : *kv.format().v;
  std::vector<std::byte> out;
  for (size_t b = 0; b < kv.num_blocks(); ++b) {
    for (size_t h = 0; h < kv.spec().num_kv_heads; ++h) {
      const KvRows rows =
          keys ? kv.keys(0, BlockId{static_cast<uint32_t>(b)}, h) : kv.values(0, BlockId{static_cast<uint32_t>(b)}, h);
      const auto* p = static_cast<const std::byte*>(rows.data);
      out.insert(out.end(), p, p + f.head_block_bytes());
    }
  }
  return out;
}

float element_at(const std::vector<std::byte>& pool, KvDType type, size_t index) {
  if (type == KvDType::kF32) {
    float v;
    std::memcpy(&v, &pool[index * 4], 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, &pool[index * 2], 2);
  return type == KvDType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

TEST_F(GpuAttentionTest, KvWriteStoresTheHostsBytes) {
  const uint32_t kv_heads = 2, width = 40, tokens = 23;
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16}) {
    for (uint32_t block_size : {1u, 4u, 16u}) {
      const KvCacheSpec spec{.num_layers = 1,
                             .num_kv_heads = kv_heads,
                             .head_dim = width,
                             .dtype = {type, type},
                             .block_size = block_size};
      KvStorage kv(spec, (tokens + block_size - 1) / block_size + 5);
      // Slots in scattered blocks; values of every kind the rounding meets: normal, subnormal in f16, ties, overflow,
      // infinities, NaN, signed zero.
      std::vector<uint32_t> slots(kv.token_capacity());
      std::iota(slots.begin(), slots.end(), 0u);
      std::shuffle(slots.begin(), slots.end(), rng_);
      slots.resize(tokens);
      const float specials[] = {1e-6f,    -3e-8f,    65504.0f, 65520.0f, 1e6f,
                                INFINITY, -INFINITY, NAN,      -0.0f,    1.0009765625f};
      std::normal_distribution<float> normal(0.0f, 4.0f);
      std::vector<float> k(tokens * kv_heads * width), v(k.size());
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = i % 7 == 0 ? specials[i / 7 % std::size(specials)] : normal(rng_);
        v[i] = normal(rng_);
      }
      for (uint32_t t = 0; t < tokens; ++t) {
        write_kv_run(kv, 0, KvSlot{slots[t]}, 1, std::span(k).subspan(t * kv_heads * width, kv_heads * width),
                     std::span(v).subspan(t * kv_heads * width, kv_heads * width));
      }
      for (bool keys : {true, false}) {
        const std::vector<std::byte> want = pool_bytes(kv, keys);
        auto pool = device_buffer(std::vector<std::byte>(want.size()));
        auto rows = device_buffer(keys ? k : v);
        auto slot_buffer = device_buffer(slots);
        ASSERT_TRUE(ops_->kv_write(type, *rows, *pool, *slot_buffer, tokens, kv_heads, width, block_size));
        std::vector<std::byte> got(want.size());
        ASSERT_TRUE(pool->download(got));
        EXPECT_TRUE(got == want) << kv_dtype_name(type) << " block size " << block_size << (keys ? " keys" : " values");
      }
    }
  }
  auto any = device_buffer(std::vector<std::byte>(64));
  EXPECT_EQ(ops_->kv_write(KvDType::kInt8, *any, *any, *any, 1, 1, 32, 16).code(), ErrorCode::kUnimplemented);
}

TEST_F(GpuAttentionTest, PagedAttentionEqualsTheCpuWithinItsBound) {
  const uint32_t heads = 8, kv_heads = 2, head_dim = 40, value_width = 24;
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16}) {
    for (uint32_t block_size : {1u, 4u, 16u}) {
      const KvCacheSpec spec{.num_layers = 1,
                             .num_kv_heads = kv_heads,
                             .head_dim = head_dim,
                             .v_head_dim = value_width,
                             .dtype = {type, type},
                             .block_size = block_size};
      const uint32_t num_blocks = 250 / block_size + 8;
      KvStorage kv(spec, num_blocks);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> k(kv_heads * head_dim), v(kv_heads * value_width);
      for (size_t slot = 0; slot < kv.token_capacity(); ++slot) {
        for (float& x : k) x = normal(rng_);
        for (float& x : v) x = normal(rng_);
        write_kv_run(kv, 0, KvSlot{slot}, 1, k, v);
      }
      // Three sequences over shuffled blocks: a long decode context, a prefill chunk (5 tokens after 7 cached), a
      // context with a hole in the middle.
      std::vector<uint32_t> ids(num_blocks);
      std::iota(ids.begin(), ids.end(), 0u);
      std::shuffle(ids.begin(), ids.end(), rng_);
      const uint32_t cached[] = {150, 12, 40};
      std::vector<std::vector<BlockId>> tables;
      size_t next = 0;
      for (uint32_t c : cached) {
        std::vector<BlockId> t;
        for (uint32_t b = 0; b < (c + block_size - 1) / block_size; ++b) t.push_back(BlockId{ids[next++]});
        tables.push_back(t);
      }
      tables[2][tables[2].size() / 2] = kNullBlock;
      std::vector<SequenceAttention> sequences;
      for (size_t s = 0; s < 3; ++s) sequences.push_back({.blocks = tables[s], .num_cached = cached[s]});
      const std::vector<uint32_t> sequence_of_token{0, 1, 1, 1, 1, 1, 2}, visible{150, 8, 9, 10, 11, 12, 40};
      const uint32_t n = static_cast<uint32_t>(visible.size());
      std::vector<float> q(n * heads * head_dim);
      for (float& x : q) x = normal(rng_);
      const AttentionShape shape{
          .num_heads = heads, .num_kv_heads = kv_heads, .head_dim = head_dim, .v_head_dim = value_width};
      ThreadPool pool(2);
      BatchAttention cpu(pool, shape);
      std::vector<float> want(n * heads * value_width);
      cpu.run(kv, 0, {.sequences = sequences, .sequence_of_token = sequence_of_token, .visible_slots = visible}, q,
              want);

      // The device's copy: pools, block tables [sequence][max_blocks] with holes, (sequence, visible) per token.
      uint32_t max_blocks = 0;
      for (const auto& t : tables) max_blocks = std::max<uint32_t>(max_blocks, t.size());
      std::vector<uint32_t> table_words(3 * max_blocks, kHole), token_info;
      for (size_t s = 0; s < 3; ++s)
        for (size_t b = 0; b < tables[s].size(); ++b)
          table_words[s * max_blocks + b] = tables[s][b] == kNullBlock ? kHole : tables[s][b].value;
      for (uint32_t t = 0; t < n; ++t) token_info.insert(token_info.end(), {sequence_of_token[t], visible[t]});
      const std::vector<std::byte> key_pool = pool_bytes(kv, true), value_pool = pool_bytes(kv, false);
      auto qb = device_buffer(q), kb = device_buffer(key_pool), vb = device_buffer(value_pool);
      auto tb = device_buffer(table_words), ib = device_buffer(token_info);
      const uint32_t max_slots = 150;
      auto scratch = device_buffer(std::vector<float>(n * heads * max_slots));
      auto out = device_buffer(std::vector<float>(want.size(), NAN));
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      const GpuOps::AttentionShape gpu_shape{.heads = heads,
                                             .kv_heads = kv_heads,
                                             .head_dim = head_dim,
                                             .value_width = value_width,
                                             .block_size = block_size,
                                             .max_blocks = max_blocks,
                                             .max_slots = max_slots,
                                             .scale = scale};
      ASSERT_TRUE(ops_->paged_attention(type, type, *qb, *kb, *vb, *tb, *ib, *scratch, *out, n, gpu_shape));
      std::vector<float> got(want.size());
      ASSERT_TRUE(out->download(std::as_writable_bytes(std::span(got))));

      for (uint32_t t = 0; t < n; ++t) {
        const auto& table = tables[sequence_of_token[t]];
        for (uint32_t h = 0; h < heads; ++h) {
          const uint32_t g = h / (heads / kv_heads);
          // The reference's probabilities in double, and the bound's terms.
          std::vector<double> s(visible[t], -INFINITY);
          double top = -INFINITY, error = 0.0;
          for (uint32_t slot = 0; slot < visible[t]; ++slot) {
            const BlockId block = table[slot / block_size];
            if (block == kNullBlock) continue;
            const size_t row = (block.value * kv_heads + g) * block_size + slot % block_size;
            double dot = 0.0, magnitude = 0.0;
            for (uint32_t i = 0; i < head_dim; ++i) {
              const double term =
                  double(q[(t * heads + h) * head_dim + i]) * element_at(key_pool, type, row * head_dim + i);
              dot += term;
              magnitude += std::fabs(term);
            }
            s[slot] = scale * dot;
            top = std::max(top, s[slot]);
            error = std::max(error, 2.0 * head_dim * kU * scale * magnitude);
          }
          double sum = 0.0, spread = 0.0;
          for (double& x : s) {
            if (x == -INFINITY) {
              x = 0.0;
              continue;
            }
            spread = std::max(spread, top - x);
            sum += (x = std::exp(x - top));
          }
          const double exp_error = (3 + 2 * spread) * 0x1p-23 + 2e-7;
          const double factor = std::expm1(2 * error) + 2 * exp_error + 2.0 * (visible[t] + 2) * kU;
          for (uint32_t d = 0; d < value_width; ++d) {
            double weight = 0.0;
            for (uint32_t slot = 0; slot < visible[t]; ++slot) {
              if (s[slot] == 0.0) continue;
              const BlockId block = table[slot / block_size];
              const size_t row = (block.value * kv_heads + g) * block_size + slot % block_size;
              weight += s[slot] / sum * std::fabs(element_at(value_pool, type, row * value_width + d));
            }
            const size_t i = (t * heads + h) * value_width + d;
            ASSERT_LE(std::fabs(got[i] - want[i]), factor * weight + 1e-7)
                << kv_dtype_name(type) << " block size " << block_size << " token " << t << " head " << h << " element "
                << d;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs
