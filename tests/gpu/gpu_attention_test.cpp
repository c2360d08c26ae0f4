// The KV write and paged attention shaders against the CPU's: the bytes the KV write stores are the host KvStorage's
// (the same layout and the same rounding, and for int8 and int4 per token the same scales, mins and q: blocks move
// between device, host tier and disk byte for byte), and paged attention over a mixed batch (a decode token over
// scattered blocks, a prefill chunk, a context with a hole; GQA; block sizes 1, 4 and 16; f32, f16 and bf16 K/V)
// equals BatchAttention, the CPU's fp32 path; over int8 and int4 K/V per token, read in place, it equals attention
// in double over the values the CPU reads back (kv_element), within the same bound.
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
#include "tensor/kv_quant.h"

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

// Element i of row r of KV head g in `block` of layer 0's K (or V), as the CPU reads it back.
float element_at(const KvStorage& kv, bool keys, uint32_t block, size_t g, size_t r, size_t i) {
  const KvRows rows = keys ? kv.keys(0, BlockId{block}, g) : kv.values(0, BlockId{block}, g);
  return kv_element(rows, keys ? kv.format().k.width : kv.format().v->width, r, i);
}

TEST_F(GpuAttentionTest, KvWriteStoresTheHostsBytes) {
  const uint32_t kv_heads = 2, tokens = 23;
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kInt8, KvDType::kInt4}) {
    // Quantized: rows of 64 (two groups of 32) and of 40 (one group, int4 chunks of 32 and 8).
    for (uint32_t width : kv_dtype_quantized(type) ? std::vector<uint32_t>{64, 40} : std::vector<uint32_t>{40})
      for (uint32_t block_size : {1u, 4u, 16u}) {
        const KvCacheSpec spec{.num_layers = 1,
                               .num_kv_heads = kv_heads,
                               .head_dim = width,
                               .dtype = {type, type},
                               .key_scale_axis = KvScaleAxis::kPerToken,
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
        // Quantized rows get finite values, with constant groups, ties of the rounding and outliers among them.
        const bool quantized = kv_dtype_quantized(type);
        for (size_t i = 0; i < k.size(); ++i) {
          if (!quantized) {
            k[i] = i % 7 == 0 ? specials[i / 7 % std::size(specials)] : normal(rng_);
          } else {
            k[i] = i / 32 % 5 == 0 ? 0.75f : i % 11 == 0 ? 300.0f * normal(rng_) : normal(rng_);
          }
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
          ASSERT_TRUE(
              ops_->kv_write(keys ? kv.format().k : *kv.format().v, *rows, *pool, *slot_buffer, tokens, kv_heads));
          std::vector<std::byte> got(want.size());
          ASSERT_TRUE(pool->download(got));
          EXPECT_TRUE(got == want) << kv_dtype_name(type) << " width " << width << " block size " << block_size
                                   << (keys ? " keys" : " values");
        }
      }
  }
  // Per-channel and rotated keys are refused by name.
  auto any = device_buffer(std::vector<std::byte>(64));
  const KvCacheSpec per_channel{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 32, .dtype = {KvDType::kInt8, KvDType::kInt8}, .block_size = 16};
  const Status refused = ops_->kv_write(kv_format(per_channel).k, *any, *any, *any, 1, 1);
  EXPECT_EQ(refused.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(refused.message().find("per-channel"), std::string::npos) << refused.message();
}

TEST_F(GpuAttentionTest, PagedAttentionEqualsTheCpuWithinItsBound) {
  const uint32_t heads = 8, kv_heads = 2, head_dim = 40, value_width = 24;
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kInt8, KvDType::kInt4}) {
    const bool quantized = kv_dtype_quantized(type);
    for (uint32_t block_size : {1u, 4u, 16u}) {
      const KvCacheSpec spec{.num_layers = 1,
                             .num_kv_heads = kv_heads,
                             .head_dim = head_dim,
                             .v_head_dim = value_width,
                             .dtype = {type, type},
                             .key_scale_axis = KvScaleAxis::kPerToken,
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
      ASSERT_TRUE(
          ops_->paged_attention(kv.format().k, *kv.format().v, *qb, *kb, *vb, *tb, *ib, *scratch, *out, n, gpu_shape));
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
            double dot = 0.0, magnitude = 0.0;
            for (uint32_t i = 0; i < head_dim; ++i) {
              const double term = double(q[(t * heads + h) * head_dim + i]) *
                                  element_at(kv, true, block.value, g, slot % block_size, i);
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
            double weight = 0.0, exact = 0.0;
            for (uint32_t slot = 0; slot < visible[t]; ++slot) {
              if (s[slot] == 0.0) continue;
              const BlockId block = table[slot / block_size];
              const double value = element_at(kv, false, block.value, g, slot % block_size, d);
              weight += s[slot] / sum * std::fabs(value);
              exact += s[slot] / sum * value;
            }
            // Quantized K/V: against attention in double over the values read back (BatchAttention's quantized
            // kernels have bounds of their own); the others against the CPU's fp32 path.
            const size_t i = (t * heads + h) * value_width + d;
            const double reference = quantized ? exact : want[i];
            ASSERT_LE(std::fabs(got[i] - reference), factor * weight + 1e-7)
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
