// The KV write and paged attention shaders against the CPU's: the bytes the KV write stores are the host KvStorage's
// (the same layout and the same rounding, and for int8 and int4 per token the same scales, mins and q: blocks move
// between device, host tier and disk byte for byte), and paged attention over a mixed batch (a decode token over
// scattered blocks, a prefill chunk, a context with a hole; GQA; block sizes 1, 4 and 16; f32, f16 and bf16 K/V;
// without and with sliding windows, the layer's and a sequence's own)
// equals BatchAttention, the CPU's fp32 path; over int8 and int4 K/V per token, read in place, it equals attention
// in double over the values the CPU reads back (kv_element), within the same bound, and so does the attention mass
// per slot H2O sums (slot_mass.comp against the CPU's fixed-point sums). Keys per channel, step after
// step: the pool's bytes and the key tails' rows are the host's, and attention over both within the bound.
//
// Attention's bound, from the arithmetic (u = 2^-24): a score is an fp32 dot product of head_dim terms summed in
// another order on either side, off by E <= 2 head_dim u scale sum_i |q_i k_i|; the softmax turns a score error E into
// a probability factor within e^(+-2E); Vulkan's exp is within (3 + 2|x|) 2^-23 relative and the CPU's within 2e-7;
// the output sums over the visible slots in fp32 (2 (slots + 2) u): |out - want| <= (e^(2E) - 1 + 2 exp error +
// 2 (slots + 2) u) sum_s p_s |v_s| + 1e-7, each factor computed from the data in double.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "attention/batch_attention.h"
#include "attention/write_kv.h"
#include "core/half.h"
#include "gpu/key_groups.h"
#include "gpu_test_fixture.h"
#include "tensor/kv_quant.h"

namespace kvs {
namespace {

constexpr double kU = 0x1p-24;
constexpr uint32_t kHole = 0xffffffffu;

class GpuAttentionTest : public test::GpuTest {
 protected:
  // Paged attention on the device, the output [tokens][heads][value_width]: queries q [tokens][heads][head_dim] of the
  // tokens of sequences with block tables `tables` (kNullBlock: a hole), token t of sequence sequence_of_token[t]
  // seeing visible[t] slots, over the pools `keys` and `values` (the device layout) of `format`. With `mass`, then
  // slot_mass() of every sequence: per sequence [kv_head][slot] over the slots its tokens see.
  std::vector<float> attend(const KvFormat& format, uint32_t heads, std::span<const float> q, GpuBuffer& keys,
                            GpuBuffer& values, const std::vector<std::vector<BlockId>>& tables,
                            std::span<const uint32_t> sequence_of_token, std::span<const uint32_t> visible,
                            const GpuOps::KeyTails* tails = nullptr, uint32_t window = 0,
                            std::span<const uint32_t> sequence_windows = {},
                            std::vector<std::vector<uint64_t>>* mass = nullptr) {
    const uint32_t n = static_cast<uint32_t>(visible.size()), head_dim = static_cast<uint32_t>(format.k.width);
    const uint32_t value_width = static_cast<uint32_t>(format.v->width);
    uint32_t max_blocks = 1;
    for (const auto& t : tables) max_blocks = std::max<uint32_t>(max_blocks, t.size());
    std::vector<uint32_t> table_words(tables.size() * max_blocks, kHole), token_info;
    for (size_t s = 0; s < tables.size(); ++s)
      for (size_t b = 0; b < tables[s].size(); ++b)
        table_words[s * max_blocks + b] = tables[s][b] == kNullBlock ? kHole : tables[s][b].value;
    for (uint32_t t = 0; t < n; ++t) {
      const uint32_t s = sequence_of_token[t];
      token_info.insert(token_info.end(), {s, visible[t], sequence_windows.empty() ? 0 : sequence_windows[s], 0});
    }
    auto qb = device_buffer(std::vector<float>(q.begin(), q.end()));
    auto tb = device_buffer(table_words), ib = device_buffer(token_info);
    const uint32_t max_slots = *std::max_element(visible.begin(), visible.end());
    auto scratch = device_buffer(std::vector<float>(n * heads * max_slots));
    auto out = device_buffer(std::vector<float>(n * heads * value_width, NAN));
    const GpuOps::AttentionShape shape{.heads = heads,
                                       .kv_heads = static_cast<uint32_t>(format.num_heads),
                                       .head_dim = head_dim,
                                       .value_width = value_width,
                                       .block_size = static_cast<uint32_t>(format.k.rows),
                                       .max_blocks = max_blocks,
                                       .max_slots = max_slots,
                                       .scale = 1.0f / std::sqrt(static_cast<float>(head_dim)),
                                       .window = window};
    const Status s =
        ops_->paged_attention(format.k, *format.v, *qb, keys, values, *tb, *ib, *scratch, *out, n, shape, tails);
    EXPECT_TRUE(s) << s.message();
    if (mass) {  // each sequence's rows as wide as the most slots its tokens see; its tokens listed in order
      const uint32_t kv_heads = static_cast<uint32_t>(format.num_heads);
      std::vector<uint32_t> sequences, token_list, slots(tables.size(), 0);
      for (uint32_t t = 0; t < n; ++t) slots[sequence_of_token[t]] = std::max(slots[sequence_of_token[t]], visible[t]);
      uint32_t pairs = 0;
      for (uint32_t seq = 0; seq < tables.size(); ++seq) {
        const uint32_t begin = static_cast<uint32_t>(token_list.size());
        for (uint32_t t = 0; t < n; ++t)
          if (sequence_of_token[t] == seq) token_list.push_back(t);
        sequences.insert(sequences.end(), {pairs, slots[seq], begin, static_cast<uint32_t>(token_list.size())});
        pairs += kv_heads * slots[seq];
      }
      auto sb = device_buffer(sequences), lb = device_buffer(token_list);
      auto mb = device_buffer(std::vector<uint32_t>(2 * pairs, 0xdeadbeefu));
      const Status m = ops_->slot_mass(*scratch, *ib, *sb, *lb, *mb, static_cast<uint32_t>(tables.size()),
                                       *std::max_element(slots.begin(), slots.end()), shape, 0);
      EXPECT_TRUE(m) << m.message();
      const std::vector<uint32_t> words = download<uint32_t>(*mb, 2 * pairs);
      mass->assign(tables.size(), {});
      for (uint32_t seq = 0; seq < tables.size(); ++seq) {
        const uint32_t at = sequences[4 * seq];
        for (uint32_t i = 0; i < kv_heads * slots[seq]; ++i)
          (*mass)[seq].push_back(words[2 * (at + i)] | uint64_t{words[2 * (at + i) + 1]} << 32);
      }
    }
    return download(*out, n * heads * value_width);
  }

  std::mt19937 rng_{21};
};

// A layer's K (or V) pool of `kv` as one buffer, [block][kv_head] head-blocks back to back: the device layout.
std::vector<std::byte> pool_bytes(const KvStorage& kv, bool keys, size_t layer = 0) {
  const KvTensorFormat& f = keys ? kv.format().k : *kv.format().v;
  std::vector<std::byte> out;
  for (size_t b = 0; b < kv.num_blocks(); ++b) {
    for (size_t h = 0; h < kv.spec().num_kv_heads; ++h) {
      const BlockId block{static_cast<uint32_t>(b)};
      const KvRows rows = keys ? kv.keys(layer, block, h) : kv.values(layer, block, h);
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

// One attention call's output `got` [tokens][heads][value_width] against attention in double over the values the
// reference reads (element(sequence, keys, KV head, slot, i); slots that are not readable are holes), or against the
// CPU's fp32 output `want` where given, within the bound at the top of this file.
// The scale is 1 / sqrt(head_dim), as attend() gives it.
struct AttentionCheck {
  uint32_t heads = 0, kv_heads = 0, head_dim = 0, value_width = 0;  // of the format: set by expect_within_bound
  std::span<const uint32_t> sequence_of_token, visible;
  std::span<const uint32_t> first = {};  // per token its first visible slot (a window), empty: 0
  std::span<const float> q, got, want;
  std::function<bool(uint32_t, uint32_t)> readable;
  std::function<double(uint32_t, bool, uint32_t, uint32_t, uint32_t)> element;
};

// Returns the largest factor of the bound it applied: it bounds the probabilities' relative difference too.
double expect_within_bound(const KvFormat& format, uint32_t heads, AttentionCheck c, const std::string& what) {
  double largest = 0.0;
  c.heads = heads;
  c.kv_heads = static_cast<uint32_t>(format.num_heads);
  c.head_dim = static_cast<uint32_t>(format.k.width);
  c.value_width = static_cast<uint32_t>(format.v->width);
  const double scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // the fp32 scale the device gets
  for (uint32_t t = 0; t < c.visible.size(); ++t) {
    const uint32_t seq = c.sequence_of_token[t];
    for (uint32_t h = 0; h < c.heads; ++h) {
      const uint32_t g = h / (c.heads / c.kv_heads);
      // The reference's probabilities in double, and the bound's terms.
      std::vector<double> s(c.visible[t], -INFINITY);
      double top = -INFINITY, error = 0.0;
      const uint32_t first = c.first.empty() ? 0 : c.first[t];
      for (uint32_t slot = first; slot < c.visible[t]; ++slot) {
        if (!c.readable(seq, slot)) continue;
        double dot = 0.0, magnitude = 0.0;
        for (uint32_t i = 0; i < c.head_dim; ++i) {
          const double term = double(c.q[(t * c.heads + h) * c.head_dim + i]) * c.element(seq, true, g, slot, i);
          dot += term;
          magnitude += std::fabs(term);
        }
        s[slot] = scale * dot;
        top = std::max(top, s[slot]);
        error = std::max(error, 2.0 * c.head_dim * kU * scale * magnitude);
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
      const double factor = std::expm1(2 * error) + 2 * exp_error + 2.0 * (c.visible[t] - first + 2) * kU;
      largest = std::max(largest, factor);
      for (uint32_t d = 0; d < c.value_width; ++d) {
        double weight = 0.0, exact = 0.0;
        for (uint32_t slot = 0; slot < c.visible[t]; ++slot) {
          if (s[slot] == 0.0) continue;
          const double value = c.element(seq, false, g, slot, d);
          weight += s[slot] / sum * std::fabs(value);
          exact += s[slot] / sum * value;
        }
        const size_t i = (t * c.heads + h) * c.value_width + d;
        const double reference = c.want.empty() ? exact : c.want[i];
        EXPECT_LE(std::fabs(c.got[i] - reference), factor * weight + 1e-7)
            << what << " token " << t << " head " << h << " element " << d;
        if (std::fabs(c.got[i] - reference) > factor * weight + 1e-7) return largest;
      }
    }
  }
  return largest;
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
  // Keys per channel without their tails are refused by name; rotated keys of a width no Hadamard transform has too.
  auto any = device_buffer(std::vector<std::byte>(64));
  KvCacheSpec per_channel{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 16, .dtype = {KvDType::kInt8, KvDType::kInt8}, .block_size = 1};
  const Status no_tails = ops_->kv_write(kv_format(per_channel).k, *any, *any, *any, 1, 1);
  EXPECT_EQ(no_tails.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(no_tails.message().find("key tails"), std::string::npos) << no_tails.message();
  per_channel.rotate_keys = true;
  per_channel.head_dim = 24;
  const Status rotated = ops_->kv_write(kv_format(per_channel).k, *any, *any, *any, 1, 1);
  EXPECT_EQ(rotated.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(rotated.message().find("power of two"), std::string::npos) << rotated.message();
}

// Keys quantized per channel, step after step as an engine writes them: two sequences of layer 1 (of 2) over
// shuffled blocks, prefill chunks that complete groups, leave one filling or both, and decode tokens that complete
// one. After every step the device's pool holds the host's bytes (every group completed so far, quantized from the
// same fp16 rows into the same pairs and q), each filling group's rows in its key tail are the host's, and paged
// attention reading both equals attention in double over the values the host reads back, within the bound above.
TEST_F(GpuAttentionTest, KeysPerChannelWaitInTailsAndSealAsTheCpus) {
  const uint32_t kv_heads = 2, heads = 4, value_width = 16, layer = 1;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    for (uint32_t head_dim : {64u, 40u}) {          // int4: chunks of 32, and of 32 and 8
      for (uint32_t block_size : {4u, 16u, 32u}) {  // groups of 4, 16 and 16 rows (two a block)
        const KvCacheSpec spec{.num_layers = 2,
                               .num_kv_heads = kv_heads,
                               .head_dim = head_dim,
                               .v_head_dim = value_width,
                               .dtype = {type, KvDType::kF32},
                               .key_scale_axis = KvScaleAxis::kPerChannel,
                               .block_size = block_size};
        const uint32_t num_blocks = 96 / block_size + 8;
        KvStorage kv(spec, num_blocks, num_blocks);  // tail b for block b, given when a group of it fills
        const KvFormat& format = kv.format();
        const std::string what = fmt::format("{} width {} block size {}", kv_dtype_name(type), head_dim, block_size);
        std::vector<uint32_t> free(num_blocks);
        std::iota(free.begin(), free.end(), 0u);
        std::shuffle(free.begin(), free.end(), rng_);
        std::vector<uint32_t> key_tails(num_blocks, kNoKeyTail);
        std::vector<std::vector<BlockId>> tables(2);
        std::vector<uint32_t> cached(2, 0);
        auto pool = device_buffer(std::vector<std::byte>(pool_bytes(kv, true, layer).size()));
        auto tails = device_buffer(std::vector<std::byte>(num_blocks * format.key_tail_bytes()));
        // Tokens per sequence and step: prefill chunks of 37 and 16, 3 decode steps, chunks of 20 and 5, 2 more steps.
        const std::vector<std::array<uint32_t, 2>> steps{{37, 16}, {1, 1}, {1, 1}, {1, 1}, {20, 5}, {1, 1}, {1, 1}};
        for (size_t step = 0; step < steps.size(); ++step) {
          std::vector<KvSlot> slots;
          std::vector<uint32_t> sequence_of_token, visible;
          for (uint32_t s = 0; s < 2; ++s) {
            for (uint32_t i = 0; i < steps[step][s]; ++i) {
              const uint32_t slot = cached[s] + i;
              if (slot / block_size == tables[s].size()) {
                tables[s].push_back(BlockId{free.back()});
                free.pop_back();
              }
              slots.push_back(KvSlot{size_t{tables[s][slot / block_size].value} * block_size + slot % block_size});
              sequence_of_token.push_back(s);
              visible.push_back(slot + 1);
            }
          }
          // A block whose group fills after the step gets its tail, as the KV manager gives one.
          for (uint32_t s = 0; s < 2; ++s) {
            const uint32_t end = cached[s] + steps[step][s];
            if (format.k.tail_rows(end) > 0) {
              const uint32_t block = tables[s][end / block_size].value;
              key_tails[block] = block;
            }
          }
          const uint32_t n = static_cast<uint32_t>(slots.size());
          std::vector<float> k(n * kv_heads * head_dim), v(n * kv_heads * value_width);
          for (size_t i = 0; i < k.size(); ++i) k[i] = (i % head_dim) % 9 == 0 ? 20.0f * normal(rng_) : normal(rng_);
          for (float& x : v) x = normal(rng_);
          // The host, run by run.
          for (const KvWriteRun& run : kv_write_runs(slots, block_size)) {
            const KvSlot first = slots[run.first];
            write_kv_run(kv, layer, first, run.count,
                         std::span(k).subspan(run.first * kv_heads * head_dim, run.count * kv_heads * head_dim),
                         std::span(v).subspan(run.first * kv_heads * value_width, run.count * kv_heads * value_width),
                         key_tails[first.value / block_size]);
          }
          for (uint32_t s = 0; s < 2; ++s) cached[s] += steps[step][s];
          // The device.
          const KeyGroupPlan plan = plan_key_groups(format.k, slots, key_tails);
          std::vector<uint32_t> slot_words, sequence_tails;
          for (KvSlot slot : slots) slot_words.push_back(static_cast<uint32_t>(slot.value));
          for (uint32_t s = 0; s < 2; ++s) {
            const uint32_t rows = static_cast<uint32_t>(format.k.tail_rows(cached[s]));
            sequence_tails.push_back(rows > 0 ? key_tails[tables[s][cached[s] / block_size].value] : kNoKeyTail);
            sequence_tails.push_back(cached[s] - rows);
          }
          auto rows = device_buffer(k), slot_buffer = device_buffer(slot_words);
          auto tail_of_token = device_buffer(plan.tail_of_token), seals = device_buffer(plan.seals);
          auto sequence_tail_buffer = device_buffer(sequence_tails);
          const GpuOps::KeyTails key_tail_step{.tails = tails.get(),
                                               .tail_of_token = tail_of_token.get(),
                                               .seals = seals.get(),
                                               .num_seals = static_cast<uint32_t>(plan.num_seals()),
                                               .sequence_tails = sequence_tail_buffer.get(),
                                               .layer = layer,
                                               .num_layers = 2};
          ASSERT_TRUE(ops_->kv_write(format.k, *rows, *pool, *slot_buffer, n, kv_heads, &key_tail_step)) << what;
          const std::vector<std::byte> want = pool_bytes(kv, true, layer);
          std::vector<std::byte> got(want.size());
          ASSERT_TRUE(pool->download(got));
          ASSERT_TRUE(got == want) << what << " step " << step;
          std::vector<uint16_t> device_tails(tails->bytes() / 2);
          ASSERT_TRUE(tails->download(std::as_writable_bytes(std::span(device_tails))));
          for (uint32_t s = 0; s < 2; ++s) {
            const uint32_t tail = sequence_tails[2 * s], tail_rows = cached[s] - sequence_tails[2 * s + 1];
            if (tail == kNoKeyTail) continue;
            for (uint32_t h = 0; h < kv_heads; ++h) {
              const auto* host = static_cast<const uint16_t*>(kv.key_tail_rows(tail, layer, h).data);
              const size_t at = ((size_t{tail} * 2 + layer) * kv_heads + h) * format.k.group_size * head_dim;
              ASSERT_TRUE(std::equal(host, host + tail_rows * head_dim, device_tails.begin() + at))
                  << what << " step " << step << " sequence " << s << " head " << h;
            }
          }

          // Attention over both, the values as f32 rows of layer 1's V pool.
          std::vector<float> q(n * heads * head_dim);
          for (float& x : q) x = normal(rng_);
          auto values = device_buffer(pool_bytes(kv, false, layer));
          const std::vector<float> result =
              attend(format, heads, q, *pool, *values, tables, sequence_of_token, visible, &key_tail_step);
          const AttentionCheck check{
              .sequence_of_token = sequence_of_token,
              .visible = visible,
              .q = q,
              .got = result,
              .want = {},  // against the reference in double
              .readable = [](uint32_t, uint32_t) { return true; },
              .element = [&](uint32_t seq, bool keys, uint32_t g, uint32_t slot, uint32_t i) -> double {
                const BlockId block = tables[seq][slot / block_size];
                const uint32_t tail = sequence_tails[2 * seq], tail_first = sequence_tails[2 * seq + 1];
                if (!keys) return kv_element(kv.values(layer, block, g), value_width, slot % block_size, i);
                if (tail != kNoKeyTail && slot >= tail_first) {
                  const auto* rows = static_cast<const uint16_t*>(kv.key_tail_rows(tail, layer, g).data);
                  return fp16_to_fp32(rows[(slot - tail_first) * head_dim + i]);
                }
                return kv_element(kv.keys(layer, block, g), head_dim, slot % block_size, i);
              }};
          expect_within_bound(format, heads, check, what + fmt::format(" step {}", step));
        }
      }
    }
  }
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
      // Without a window, then a window of 6 over every sequence, narrowed to 4 by the prefill chunk's own.
      for (uint32_t window : {0u, 6u}) {
        const std::vector<uint32_t> sequence_windows{0, window > 0 ? 4u : 0u, 0};
        std::vector<uint32_t> first(n);
        for (size_t s = 0; s < 3; ++s) sequences[s].window = sequence_windows[s];
        for (uint32_t t = 0; t < n; ++t) {
          const size_t w = narrower_window(window, sequence_windows[sequence_of_token[t]]);
          first[t] = w > 0 && visible[t] > w ? visible[t] - static_cast<uint32_t>(w) : 0;
        }
        // H2O's slot mass of every sequence on both sides.
        std::vector<std::vector<uint64_t>> cpu_mass(3), gpu_mass;
        for (size_t s = 0; s < 3; ++s) {
          cpu_mass[s].assign(kv_heads * cached[s], 0);
          sequences[s].slot_mass = {.data = cpu_mass[s].data(), .num_kv_heads = kv_heads, .capacity = cached[s]};
        }
        std::vector<float> want(n * heads * value_width);
        cpu.run(kv, 0, {.sequences = sequences, .sequence_of_token = sequence_of_token, .visible_slots = visible}, q,
                want, window);

        // The device's copy of the pools; block tables with holes.
        auto kb = device_buffer(pool_bytes(kv, true)), vb = device_buffer(pool_bytes(kv, false));
        const std::vector<float> got = attend(kv.format(), heads, q, *kb, *vb, tables, sequence_of_token, visible,
                                              nullptr, window, sequence_windows, &gpu_mass);
        // Quantized K/V: against attention in double over the values read back (BatchAttention's quantized kernels
        // have bounds of their own); the others against the CPU's fp32 path.
        const AttentionCheck check{
            .sequence_of_token = sequence_of_token,
            .visible = visible,
            .first = first,
            .q = q,
            .got = got,
            .want = quantized ? std::span<const float>() : std::span<const float>(want),
            .readable = [&](uint32_t seq, uint32_t slot) { return tables[seq][slot / block_size] != kNullBlock; },
            .element =
                [&](uint32_t seq, bool keys, uint32_t g, uint32_t slot, uint32_t i) {
                  return element_at(kv, keys, tables[seq][slot / block_size].value, g, slot % block_size, i);
                }};
        const std::string what = fmt::format("{} block size {} window {}", kv_dtype_name(type), block_size, window);
        const double factor = expect_within_bound(kv.format(), heads, check, what);
        // Each side's probabilities within `factor` of each other, the query heads' fp32 sum (4 a KV head) within
        // 4 u of its own, and each token's mass rounded to a unit of 2^-24 on either side: per slot,
        // |gpu - cpu| <= (factor (1 + factor) + 8 u) cpu + the tokens that see it. Over f32, f16 and bf16 K/V, where
        // the CPU runs its fp32 path (its quantized kernels have bounds of their own; the mass reads the same
        // probabilities whatever the element).
        ASSERT_EQ(gpu_mass.size(), 3u);
        for (size_t s = 0; s < (quantized ? 0 : 3); ++s) {
          for (uint32_t g = 0; g < kv_heads; ++g) {
            for (uint32_t slot = 0; slot < cached[s]; ++slot) {
              double seen = 0;
              for (uint32_t t = 0; t < n; ++t)
                seen += sequence_of_token[t] == s && slot >= first[t] && slot < visible[t];
              const double cpu_units = double(cpu_mass[s][g * cached[s] + slot]);
              const double gpu_units = double(gpu_mass[s][g * cached[s] + slot]);
              ASSERT_LE(std::fabs(gpu_units - cpu_units), (factor * (1 + factor) + 8 * kU) * cpu_units + seen)
                  << what << " sequence " << s << " KV head " << g << " slot " << slot;
              if (seen == 0 || tables[s][slot / block_size] == kNullBlock) {
                ASSERT_EQ(gpu_units, 0.0) << what << " sequence " << s << " slot " << slot;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs
