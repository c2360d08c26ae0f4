// MLA's absorbed attention with bf16 products, on AMX-BF16 tiles and with vdpbf16ps (each kernel this CPU runs),
// against a naive reference in double over the same bf16 latent rows: block sizes smaller than, equal to and larger
// than a tile's 16 rows, partial last blocks, head counts below, at and above a tile's 16, one token (its slots split
// between the threads and merged) and several (one run each), scores that rise along the context (the running max
// raised and the sums rescaled), and the cases it leaves to the fp32 path.
//
// The bound, from the arithmetic (tensor/latent_partial.h): bf16 keeps 8 significant bits, so rounding to nearest is
// within 2^-8 relative; q rounded to bf16 moves each product q_i k_i by at most
// 2^-8 |q_i k_i|, so a score by E <= scale 2^-8 sum_i |q_i k_i| (plus fp32 summation, 1e-6 of the same sum); the
// softmax then moves each probability by a factor within e^(+-2E); p rounded to bf16 adds 2^-8 of each p, and fp32
// sums over at most 300 slots 300 x 2^-24 < 2e-5: |out - want| <= (e^(2E) - 1 + 2^-8 + 2e-5) sum_s p_s |v_s| + 1e-6.
// Against a reference whose queries are rounded alike, E is fp32's alone.
#include "attention/latent_bf16_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/write_kv.h"
#include "core/half.h"

namespace kvs {
namespace {

struct LatentCase {
  size_t rank, rope, heads, block_size;
};

class LatentBf16 : public ::testing::TestWithParam<std::tuple<LatentCase, LatentKernel>> {
 protected:
  void SetUp() override {
    if (!latent_kernel_usable(kernel()))
      GTEST_SKIP() << "this CPU (or the ISA limit) has no " << latent_kernel_name(kernel());
  }
  LatentKernel kernel() const { return std::get<1>(GetParam()); }
};

// One latent cache of `slots` random rows in bf16, and their stored values.
struct LatentCache {
  KvCacheSpec spec;
  KvStorage kv;
  std::vector<float> rows;  // [slot][width] as stored
  std::vector<BlockId> blocks;
  size_t width;

  LatentCache(const LatentCase& c, size_t slots, KvDType dtype, std::mt19937& rng)
      : spec{.num_layers = 1,
             .mla = true,
             .kv_lora_rank = c.rank,
             .rope_dim = c.rope,
             .dtype = {dtype, dtype},
             .key_scale_axis = KvScaleAxis::kPerToken,
             .block_size = c.block_size},
        kv(spec, (slots + c.block_size - 1) / c.block_size + 3),
        width(c.rank + c.rope) {
    // The sequence's blocks in a shuffled order of the pool's.
    std::vector<uint32_t> ids(kv.num_blocks());
    std::iota(ids.begin(), ids.end(), 0u);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (size_t b = 0; b < (slots + c.block_size - 1) / c.block_size; ++b) blocks.push_back(BlockId{ids[b]});
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> row(width);
    rows.resize(slots * width);
    for (size_t s = 0; s < slots; ++s) {
      for (float& x : row) x = u(rng);
      row[0] = static_cast<float>(s) / static_cast<float>(slots);  // a ramp: scores rise along the context
      const KvSlot slot{blocks[s / c.block_size].value * c.block_size + s % c.block_size};
      write_kv_run(kv, 0, slot, 1, row, {});
      for (size_t i = 0; i < width; ++i) rows[s * width + i] = bf16_to_fp32(fp32_to_bf16(row[i]));
    }
  }
};

// Head h's output over the first `visible` rows (double), and its bound. rounded_q: the queries rounded to bf16 as the
// kernel rounds them, which leaves the scores only fp32's error: the bound is then mostly p's rounding, tight enough
// to see one slot too many or too few.
void naive(const LatentCache& cache, const float* q_rows, size_t heads, size_t visible, bool rounded_q,
           std::vector<double>& want, std::vector<double>& bound) {
  const size_t width = cache.width;
  const double scale = 1.0 / std::sqrt(double(width));
  want.assign(heads * width, 0.0);
  bound.assign(heads * width, 0.0);
  std::vector<float> q(q_rows, q_rows + heads * width);
  if (rounded_q)
    for (float& x : q) x = bf16_to_fp32(fp32_to_bf16(x));
  for (size_t h = 0; h < heads; ++h) {
    std::vector<double> p(visible);
    double top = -INFINITY, error = 0.0;
    for (size_t s = 0; s < visible; ++s) {
      double dot = 0.0, magnitude = 0.0;
      for (size_t i = 0; i < width; ++i) {
        dot += double(q[h * width + i]) * cache.rows[s * width + i];
        magnitude += std::fabs(double(q[h * width + i]) * cache.rows[s * width + i]);
      }
      p[s] = scale * dot;
      top = std::max(top, p[s]);
      error = std::max(error, scale * magnitude * ((rounded_q ? 0.0 : 0x1p-8) + 1e-6));
    }
    double sum = 0.0;
    for (double& x : p) sum += (x = std::exp(x - top));
    const double factor = std::expm1(2.0 * error) + 0x1p-8 + 2e-5;
    for (size_t s = 0; s < visible; ++s) {
      for (size_t i = 0; i < width; ++i) {
        want[h * width + i] += p[s] / sum * cache.rows[s * width + i];
        bound[h * width + i] += factor * p[s] / sum * std::fabs(cache.rows[s * width + i]);
      }
    }
    for (size_t i = 0; i < width; ++i) bound[h * width + i] += 1e-6;
  }
}

TEST_P(LatentBf16, EqualsTheReferenceWithinTheBf16Bound) {
  const LatentCase c = std::get<0>(GetParam());
  std::mt19937 rng(11);
  constexpr size_t kSlots = 300;
  LatentCache cache(c, kSlots, KvDType::kBF16, rng);
  const size_t width = cache.width, row = c.heads * width;
  const AttentionShape shape{.num_heads = c.heads, .num_kv_heads = 1, .head_dim = width};
  // Token sets: one decode token (split between the threads), then a chunk of tokens seeing 1, 17, 33, 150, 300 slots.
  for (const std::vector<uint32_t>& visible :
       std::vector<std::vector<uint32_t>>{{kSlots}, {1, 17, 33, 150, kSlots}, {31}}) {
    for (bool rising : {false, true}) {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> q(visible.size() * row);
      for (float& x : q) x = u(rng);
      // Rising: a large weight on the ramp makes later slots score up to 0, 20 or 40 more, by head (the running max
      // raised on the way, on some lanes of a step and not others).
      if (rising)
        for (size_t i = 0; i < visible.size() * c.heads; ++i)
          q[i * width] = 20.0f * static_cast<float>(i % c.heads % 3) * std::sqrt(float(width));
      const SequenceAttention seq{.blocks = cache.blocks, .num_cached = kSlots};
      const std::vector<uint32_t> sequence_of_token(visible.size(), 0);
      const AttentionBatch batch{
          .sequences = {&seq, 1}, .sequence_of_token = sequence_of_token, .visible_slots = visible};
      for (size_t threads : {1, 2}) {
        ThreadPool pool(threads);
        LatentBf16Attention attention(pool, shape, kernel());
        ASSERT_TRUE(attention.applies(cache.kv, batch, 0));
        std::vector<float> out(visible.size() * row, NAN);
        attention.run(cache.kv, 0, batch, q, out);
        std::vector<double> want, bound;
        for (size_t t = 0; t < visible.size(); ++t) {
          for (bool rounded_q : {false, true}) {
            naive(cache, &q[t * row], c.heads, visible[t], rounded_q, want, bound);
            for (size_t i = 0; i < row; ++i)
              ASSERT_LE(std::fabs(out[t * row + i] - want[i]), bound[i])
                  << "token " << t << " seeing " << visible[t] << ", head " << i / width << " element " << i % width
                  << ", rising " << rising << ", threads " << threads << ", reference's q rounded " << rounded_q;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LatentBf16,
                         ::testing::Combine(::testing::Values(LatentCase{512, 64, 16, 16}, LatentCase{48, 16, 5, 4},
                                                              LatentCase{512, 64, 20, 64}, LatentCase{96, 32, 16, 1}),
                                            ::testing::Values(LatentKernel::kAmx, LatentKernel::kDpbf16)),
                         [](const auto& info) {
                           const LatentCase& c = std::get<0>(info.param);
                           return std::string(std::get<1>(info.param) == LatentKernel::kAmx ? "Amx" : "Dpbf16") +
                                  "_rank" + std::to_string(c.rank) + "_rope" + std::to_string(c.rope) + "_heads" +
                                  std::to_string(c.heads) + "_block" + std::to_string(c.block_size);
                         });

// On any CPU: applies() takes bf16 latents only where a bf16 kernel is usable, and never windows or slot mass.
TEST(LatentBf16Applies, LeavesOtherElementTypesWindowsAndSlotMassToTheFp32Path) {
  std::mt19937 rng(5);
  const LatentCase c{48, 16, 16, 16};
  const AttentionShape shape{.num_heads = 16, .num_kv_heads = 1, .head_dim = 64};
  ThreadPool pool(1);
  LatentBf16Attention attention(pool, shape);
  const std::vector<uint32_t> one{20}, to_first{0};
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kInt8}) {
    LatentCache cache(c, 20, dtype, rng);
    const SequenceAttention seq{.blocks = cache.blocks, .num_cached = 20};
    EXPECT_FALSE(
        attention.applies(cache.kv, {.sequences = {&seq, 1}, .sequence_of_token = to_first, .visible_slots = one}, 0))
        << kv_dtype_name(dtype);
  }
  LatentCache cache(c, 20, KvDType::kBF16, rng);
  const SequenceAttention plain{.blocks = cache.blocks, .num_cached = 20};
  const AttentionBatch batch{.sequences = {&plain, 1}, .sequence_of_token = to_first, .visible_slots = one};
  EXPECT_EQ(attention.applies(cache.kv, batch, 0), best_latent_kernel().has_value());
  EXPECT_FALSE(LatentBf16Attention(pool, shape, std::nullopt).applies(cache.kv, batch, 0)) << "no kernel";
  EXPECT_FALSE(attention.applies(cache.kv, batch, 8)) << "a layer's window";
  std::vector<uint64_t> mass(20);
  const SequenceAttention summing{
      .blocks = cache.blocks, .num_cached = 20, .slot_mass = {.data = mass.data(), .num_kv_heads = 1, .capacity = 20}};
  EXPECT_FALSE(
      attention.applies(cache.kv, {.sequences = {&summing, 1}, .sequence_of_token = to_first, .visible_slots = one}, 0))
      << "slot mass (H2O)";
  const SequenceAttention windowed{.blocks = cache.blocks, .num_cached = 20, .window = 8};
  EXPECT_FALSE(attention.applies(cache.kv,
                                 {.sequences = {&windowed, 1}, .sequence_of_token = to_first, .visible_slots = one}, 0))
      << "a sequence's window";
}

}  // namespace
}  // namespace kvs
