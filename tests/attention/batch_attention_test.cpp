// Attention over a batch against a naive reference in double: mixed batches (decode tokens of several
// sequences and a prefill chunk), MHA and GQA, block sizes 1 and 16, holes (kNullBlock), visible slots that
// are not positions, K and V of different widths and element types, the per-slot attention mass, and the
// same bits for any thread count.
//
// Tolerance: with |q|, |k|, |v| <= 1 per element, a score is an fp32 dot product of head_dim terms (error
// about head_dim x 2^-24 x head_dim relative to its scale) and an output is a sum of at most 300
// probability-weighted values (error about 300 x 2^-24 ~ 2e-5), the SIMD exp adds 2e-7 relative: 1e-4
// absolute leaves a margin of 5x over the sum of these.
#include "attention/batch_attention.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "attention/write_kv.h"
#include "core/half.h"

namespace kvs {
namespace {

constexpr double kTolerance = 1e-4;

// What a stored element reads back as: the reference keeps these, so rounding to f16/bf16 is not error.
float stored(KvDType type, float x) {
  switch (type) {
    case KvDType::kF16: return fp16_to_fp32(fp32_to_fp16(x));
    case KvDType::kBF16: return bf16_to_fp32(fp32_to_bf16(x));
    default: return x;
  }
}

struct KvFixture {
  AttentionShape shape;
  KvCacheSpec spec;
  KvStorage kv;
  std::mt19937 rng{7};
  // Reference copies of what was stored: [block][kv_head][slot][head_dim] keys, [..][value width] values.
  std::vector<float> keys, values;

  // Quantized keys (int8, int4) are scaled per token here, optionally stored rotated: per-channel groups need the
  // key tails of the engine.
  KvFixture(AttentionShape s, size_t block_size, size_t num_blocks, KvDTypes dtype = {}, bool rotate_keys = false)
      : shape(s),
        spec{.num_layers = 1,
             .num_kv_heads = s.num_kv_heads,
             .head_dim = s.head_dim,
             .v_head_dim = s.v_head_dim,
             .dtype = dtype,
             .key_scale_axis = KvScaleAxis::kPerToken,
             .rotate_keys = rotate_keys,
             .block_size = block_size},
        kv(spec, num_blocks),
        keys(num_blocks * block_size * s.num_kv_heads * s.head_dim),
        values(num_blocks * block_size * s.num_kv_heads * s.value_width()) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const size_t kd = s.head_dim, vd = s.value_width();
    std::vector<float> k(s.num_kv_heads * kd), v(s.num_kv_heads * vd);
    for (size_t slot = 0; slot < kv.token_capacity(); ++slot) {
      for (auto& x : k) x = u(rng);
      for (auto& x : v) x = u(rng);
      write_kv_run(kv, 0, KvSlot{slot}, 1, k, v);
      const size_t block = slot / block_size, in_block = slot % block_size;
      for (size_t h = 0; h < s.num_kv_heads; ++h) {
        const size_t row = (block * s.num_kv_heads + h) * block_size + in_block;
        for (size_t d = 0; d < kd; ++d) keys[row * kd + d] = stored(dtype.k, k[h * kd + d]);
        for (size_t d = 0; d < vd; ++d) values[row * vd + d] = stored(dtype.v, v[h * vd + d]);
      }
    }
  }

  std::vector<float> random_queries(size_t n) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> q(n * shape.num_heads * shape.head_dim);
    for (auto& x : q) x = u(rng);
    return q;
  }

  // out[h] for one token over slots [first, visible) of `blocks` (holes skipped); mass[s] += probabilities.
  void naive(const float* q, std::span<const BlockId> blocks, size_t visible, float* out, std::vector<double>* mass,
             size_t first = 0) {
    const size_t hd = shape.head_dim, vd = shape.value_width(), bs = spec.block_size;
    const size_t group = shape.num_heads / shape.num_kv_heads;
    for (size_t h = 0; h < shape.num_heads; ++h) {
      const size_t g = h / group;
      std::vector<double> p(visible, 0.0);
      double max = -INFINITY;
      const auto masked = [&](size_t s) { return s < first || blocks[s / bs] == kNullBlock; };
      for (size_t s = 0; s < visible; ++s) {
        if (masked(s)) continue;
        const float* k = &keys[((blocks[s / bs].value * shape.num_kv_heads + g) * bs + s % bs) * hd];
        double dot = 0;
        for (size_t d = 0; d < hd; ++d) dot += double(q[h * hd + d]) * k[d];
        p[s] = dot / std::sqrt(double(hd));
        max = std::max(max, p[s]);
      }
      double sum = 0;
      for (size_t s = 0; s < visible; ++s) {
        p[s] = masked(s) ? 0.0 : std::exp(p[s] - max);
        sum += p[s];
      }
      for (size_t d = 0; d < vd; ++d) {
        double acc = 0;
        for (size_t s = 0; s < visible; ++s) {
          if (p[s] == 0.0) continue;
          acc += p[s] / sum * values[((blocks[s / bs].value * shape.num_kv_heads + g) * bs + s % bs) * vd + d];
        }
        out[h * vd + d] = static_cast<float>(acc);
      }
      if (mass)  // [kv_head][visible slots of the sequence's capacity]
        for (size_t s = 0; s < visible; ++s) (*mass)[g * mass->size() / shape.num_kv_heads + s] += p[s] / sum;
    }
  }
};

// Three sequences: a decode token with a long context through scattered blocks, a prefill chunk of 5 new
// tokens after 7 cached ones, and a decode token whose context has a hole. Visible slots, not positions.
struct MixedBatch {
  std::vector<std::vector<BlockId>> tables;
  std::vector<SequenceAttention> sequences;
  std::vector<uint32_t> sequence_of_token, visible;

  MixedBatch(size_t block_size, size_t num_blocks) {
    const size_t long_context = 150, chunk_cached = 7, chunk_new = 5, holed = 40;
    std::vector<uint32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0u);
    std::mt19937 rng(3);
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    auto take = [&](size_t slots) {
      std::vector<BlockId> t;
      for (size_t i = 0; i < (slots + block_size - 1) / block_size; ++i) t.push_back(BlockId{ids[next++]});
      return t;
    };
    tables = {take(long_context), take(chunk_cached + chunk_new), take(holed)};
    tables[2][tables[2].size() / 2] = kNullBlock;  // a hole in the middle (its slots are never read)
    const uint32_t cached[] = {long_context, chunk_cached + chunk_new, holed};
    for (size_t i = 0; i < 3; ++i) sequences.push_back({.blocks = tables[i], .num_cached = cached[i]});
    sequence_of_token = {0, 1, 1, 1, 1, 1, 2};
    visible = {long_context, 8, 9, 10, 11, 12, holed};
  }
  AttentionBatch batch() const {
    return {.sequences = sequences, .sequence_of_token = sequence_of_token, .visible_slots = visible};
  }
};

void expect_matches_naive(const AttentionShape& shape, size_t block_size, KvDTypes dtype) {
  const size_t num_blocks = 240 / block_size + 8;
  KvFixture s(shape, block_size, num_blocks, dtype);
  MixedBatch m(block_size, num_blocks);
  const size_t n = m.visible.size(), q_width = shape.num_heads * shape.head_dim;
  const size_t width = shape.num_heads * shape.value_width();
  const std::vector<float> q = s.random_queries(n);
  std::vector<float> out(n * width), want(n * width);
  ThreadPool pool(2);
  BatchAttention attention(pool, shape);
  attention.run(s.kv, 0, m.batch(), q, out);
  for (size_t t = 0; t < n; ++t) {
    s.naive(&q[t * q_width], m.tables[m.sequence_of_token[t]], m.visible[t], &want[t * width], nullptr);
    for (size_t i = 0; i < width; ++i)
      ASSERT_NEAR(out[t * width + i], want[t * width + i], kTolerance)
          << "token " << t << " element " << i << " block size " << block_size << " kv heads " << shape.num_kv_heads
          << " value width " << shape.value_width() << " " << kv_dtypes_name(dtype);
  }
}

TEST(BatchAttention, MatchesNaiveReferenceForMixedBatches) {
  for (const AttentionShape shape : {AttentionShape{.num_heads = 4, .num_kv_heads = 4, .head_dim = 16},
                                     AttentionShape{.num_heads = 8, .num_kv_heads = 2, .head_dim = 8}}) {
    for (size_t block_size : {1, 16}) expect_matches_naive(shape, block_size, KvDType::kF32);
  }
}

// K and V each their own: a value row narrower than a key row (as MLA's expanded heads: 192 and 128), and
// K and V in different element types.
TEST(BatchAttention, KeysAndValuesMayDifferInWidthAndElementType) {
  const AttentionShape narrow_values{.num_heads = 4, .num_kv_heads = 2, .head_dim = 24, .v_head_dim = 16};
  for (size_t block_size : {1, 16}) {
    expect_matches_naive(narrow_values, block_size, KvDType::kF32);
    expect_matches_naive(narrow_values, block_size, KvDTypes(KvDType::kF16, KvDType::kBF16));
    expect_matches_naive({.num_heads = 4, .num_kv_heads = 4, .head_dim = 16}, block_size,
                         KvDTypes(KvDType::kBF16, KvDType::kF32));
  }
}

TEST(BatchAttention, SameBitsForAnyThreadCount) {
  const AttentionShape shape{.num_heads = 8, .num_kv_heads = 2, .head_dim = 8};
  KvFixture s(shape, 16, 24);
  MixedBatch m(16, 24);
  const size_t width = shape.num_heads * shape.head_dim;
  const std::vector<float> q = s.random_queries(m.visible.size());
  std::vector<float> first;
  for (size_t threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    BatchAttention attention(pool, shape);
    std::vector<float> out(m.visible.size() * width);
    attention.run(s.kv, 0, m.batch(), q, out);
    if (first.empty()) {
      first = out;
    } else {
      EXPECT_EQ(out, first) << threads << " threads";
    }
  }
}

// One decode token of an MQA model (16 query heads, one KV head) has one (token, KV head) pair: with more than
// one thread its query heads go in slices of the group, one per thread (2, 3 and 4 slices here). The result is the
// bits of the single-threaded run, for float and int8 keys (rotated: each slice rotates its own query rows), over a
// context through shuffled blocks and one with a hole, whole or through a sliding window, and matches the reference.
TEST(BatchAttention, OneTokensQueryGroupSplitAcrossThreadsKeepsTheBits) {
  const AttentionShape shape{.num_heads = 16, .num_kv_heads = 1, .head_dim = 32};
  for (const KvDTypes dtype : {KvDTypes(KvDType::kF32), KvDTypes(KvDType::kF16), KvDTypes(KvDType::kInt8)}) {
    KvFixture s(shape, 16, 24, dtype, /*rotate_keys=*/dtype.k == KvDType::kInt8);
    MixedBatch m(16, 24);
    for (const size_t sequence_index : {0, 2}) {  // 150 slots; 40 with a hole in the middle
      for (const size_t window : {0, 37}) {
        const SequenceAttention& sequence = m.sequences[sequence_index];
        const uint32_t sequence_of_token = 0, visible = sequence.num_cached;
        const AttentionBatch batch{
            .sequences = {&sequence, 1}, .sequence_of_token = {&sequence_of_token, 1}, .visible_slots = {&visible, 1}};
        const std::vector<float> q = s.random_queries(1);
        std::vector<float> first, want(shape.num_heads * shape.head_dim);
        s.naive(q.data(), m.tables[sequence_index], visible, want.data(), nullptr);
        const std::string what =
            fmt::format("{}, sequence {}, window {}", kv_dtypes_name(dtype), sequence_index, window);
        for (size_t threads : {1, 2, 3, 4}) {
          ThreadPool pool(threads);
          BatchAttention attention(pool, shape);
          std::vector<float> out(shape.num_heads * shape.head_dim);
          attention.run(s.kv, 0, batch, q, out, window);
          if (first.empty()) {
            first = out;
            if (dtype.k == KvDType::kF32 && window == 0) {
              for (size_t i = 0; i < out.size(); ++i)
                ASSERT_NEAR(out[i], want[i], kTolerance) << what << ", element " << i;
            }
          } else {
            EXPECT_EQ(out, first) << threads << " threads, " << what;
          }
        }
      }
    }
  }
}

// A sliding window of W: each token sees its last W visible slots, for windows smaller than, equal to and
// larger than the block size and the prefill chunk (5 tokens), including a window of 1 (only itself). Blocks
// wholly before every token's window may be holes (a window's dropped blocks): the result is the same.
TEST(BatchAttention, SlidingWindowMatchesNaiveMaskedAttention) {
  const AttentionShape shape{.num_heads = 8, .num_kv_heads = 2, .head_dim = 8};
  for (size_t block_size : {1, 4, 16}) {
    const size_t num_blocks = 240 / block_size + 8;
    KvFixture s(shape, block_size, num_blocks);
    MixedBatch m(block_size, num_blocks);
    const size_t n = m.visible.size(), width = shape.num_heads * shape.head_dim;
    const std::vector<float> q = s.random_queries(n);
    ThreadPool pool(2);
    BatchAttention attention(pool, shape);
    for (size_t window : {1, 3, 4, 5, 16, 17, 40, 149, 150, 1000}) {
      // The long context's blocks wholly before its window become holes.
      MixedBatch dropped = m;
      const size_t first_kept = m.visible[0] > window ? (m.visible[0] - window) / block_size : 0;
      for (size_t b = 0; b < first_kept; ++b) dropped.tables[0][b] = kNullBlock;
      dropped.sequences[0].blocks = dropped.tables[0];
      for (const MixedBatch* batch : {&m, &dropped}) {
        std::vector<float> out(n * width), want(n * width);
        attention.run(s.kv, 0, batch->batch(), q, out, window);
        for (size_t t = 0; t < n; ++t) {
          const size_t visible = m.visible[t], first = visible > window ? visible - window : 0;
          s.naive(&q[t * width], m.tables[m.sequence_of_token[t]], visible, &want[t * width], nullptr, first);
          for (size_t i = 0; i < width; ++i)
            ASSERT_NEAR(out[t * width + i], want[t * width + i], kTolerance)
                << "token " << t << " window " << window << " block size " << block_size
                << (batch == &dropped ? " with dropped blocks" : "");
        }
      }
    }
  }
}

// Each query head's probabilities sum to 1, so the mass over all slots of a KV head is (its query heads x
// tokens); per slot and KV head it matches the reference (fixed point: within kSlotMassOne's resolution per
// addition, and float rounding of the probabilities), holes get none, and the sums are the same bits however
// the batch is split over threads.
TEST(BatchAttention, SlotMassIsTheProbabilityEachSlotReceivedPerKvHead) {
  const AttentionShape shape{.num_heads = 4, .num_kv_heads = 2, .head_dim = 8};
  KvFixture s(shape, 4, 80);
  MixedBatch m(4, 80);
  const size_t n = m.visible.size(), width = shape.num_heads * shape.head_dim, heads = shape.num_kv_heads;
  const std::vector<float> q = s.random_queries(n);
  std::vector<float> out(n * width), scratch(width);
  std::vector<std::vector<uint64_t>> first_run;
  for (size_t threads : {1, 2}) {
    std::vector<SlotScores> mass;
    for (size_t i = 0; i < 3; ++i) mass.emplace_back(1, heads, m.sequences[i].num_cached);
    for (size_t i = 0; i < 3; ++i) m.sequences[i].slot_mass = mass[i].view();
    ThreadPool pool(threads);
    BatchAttention attention(pool, shape);
    attention.run(s.kv, 0, m.batch(), q, out);
    std::vector<std::vector<double>> want(3);
    for (size_t i = 0; i < 3; ++i) want[i].assign(heads * m.sequences[i].num_cached, 0.0);
    std::vector<size_t> tokens_of(3, 0);
    for (size_t t = 0; t < n; ++t) {
      const size_t seq = m.sequence_of_token[t];
      ++tokens_of[seq];
      s.naive(&q[t * width], m.tables[seq], m.visible[t], scratch.data(), &want[seq]);
    }
    for (size_t i = 0; i < 3; ++i) {
      const size_t cap = m.sequences[i].num_cached, group = shape.num_heads / heads;
      for (size_t g = 0; g < heads; ++g) {
        double total = 0;
        for (size_t slot = 0; slot < cap; ++slot) {
          const double got = double(mass[i].row(g)[slot]) / kSlotMassOne;
          EXPECT_NEAR(got, want[i][g * cap + slot], kTolerance)
              << "sequence " << i << " head " << g << " slot " << slot;
          if (m.tables[i][slot / 4] == kNullBlock) {
            EXPECT_EQ(mass[i].row(g)[slot], 0u) << "a hole got attention";
          }
          total += got;
        }
        EXPECT_NEAR(total, double(group * tokens_of[i]), 1e-4 * double(group * tokens_of[i]));
      }
      std::vector<uint64_t> bits(mass[i].row(0).begin(), mass[i].row(heads - 1).end());
      if (threads == 1) {
        first_run.push_back(bits);
      } else {
        EXPECT_EQ(bits, first_run[i]) << "sequence " << i << ": slot mass depends on the split over threads";
      }
    }
  }
}

}  // namespace
}  // namespace kvs
