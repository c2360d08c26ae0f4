// What an eviction costs a decode step, against what the step costs and against the alternative of keeping
// keys before RoPE and rotating them on every read (attention/compact_kv.h says why we re-rotate on
// compaction). Per layer, for a sequence holding `ctx` slots of 4 KV heads of head dim 64 with 8 query heads
// each (the 1B shape), f16 K/V, blocks of 16:
//   DecodeAttention   one token's attention over the ctx slots (what every step pays)
//   Compaction        one eviction under sinks (4 sinks, 16 evicted after them: every other key moves 16
//                     positions and is re-rotated); it happens once per 16 steps, so a step pays 1/16 of it
//   RotateOnRead      rotating every cached key once (read as fp32, RoPE at its slot): the least a step
//                     would pay with keys kept before RoPE
// Run on an idle machine:  build/bench_eviction --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>
#include <vector>

#include "attention/compact_kv.h"
#include "attention/paged_attention.h"
#include "attention/write_kv.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

constexpr size_t kHeads = 4, kGroup = 8, kDim = 64, kBlock = 16, kUnit = 16, kSinks = 4;

struct Sequence {
  KvCacheSpec spec;
  KvStorage kv;
  std::vector<BlockId> blocks;
  explicit Sequence(size_t ctx)
      : spec{.num_layers = 1,
             .num_kv_heads = kHeads,
             .head_dim = kDim,
             .dtype = KvDType::kF16,
             .key_scale_axis = KvScaleAxis::kPerToken,
             .block_size = kBlock},
        kv(spec, ctx / kBlock) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> k(kHeads * kDim), v(kHeads * kDim);
    for (size_t b = 0; b < ctx / kBlock; ++b)
      blocks.push_back(BlockId{static_cast<uint32_t>((b * 7) % (ctx / kBlock))});
    for (size_t s = 0; s < ctx; ++s) {
      for (float& x : k) x = u(rng);
      for (float& x : v) x = u(rng);
      write_kv_run(kv, 0, KvSlot{blocks[s / kBlock].value * kBlock + s % kBlock}, 1, k, v);
    }
  }
};

KeyRotation rope() { return {.inv_freq = rope_inverse_frequencies(kDim, 10000.0f)}; }

void BM_DecodeAttention(benchmark::State& state) {
  const size_t ctx = state.range(0);
  Sequence seq(ctx);
  std::vector<float> q(kHeads * kGroup * kDim, 0.1f), out(q.size()), scores(kHeads * kGroup * ctx);
  const AttentionShape shape{.num_heads = kHeads * kGroup, .num_kv_heads = kHeads, .head_dim = kDim};
  for (auto _ : state) {
    paged_attention(seq.kv, 0, {.blocks = seq.blocks, .num_slots = ctx}, shape, q.data(), out.data(), 0, kHeads,
                    scores);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_DecodeAttention)->Name("DecodeAttention")->ArgNames({"ctx"})->Arg(1024)->Arg(4096);

void BM_Compaction(benchmark::State& state) {
  const size_t ctx = state.range(0);
  Sequence seq(ctx);
  std::vector<std::vector<uint32_t>> kept(1);
  for (uint32_t s = 0; s < ctx; ++s)
    if (s < kSinks || s >= kSinks + kUnit) kept[0].push_back(s);
  const KeyRotation rotation = rope();
  for (auto _ : state) compact_kv(seq.kv, seq.blocks, kept, rotation);
}
BENCHMARK(BM_Compaction)->Name("Compaction")->ArgNames({"ctx"})->Arg(1024)->Arg(4096);

void BM_RotateOnRead(benchmark::State& state) {
  const size_t ctx = state.range(0);
  Sequence seq(ctx);
  const KeyRotation rotation = rope();
  // The angles of every slot, computed once (as a model's RoPE table would be).
  std::vector<float> cos(ctx * kDim / 2), sin(ctx * kDim / 2), key(kDim);
  for (size_t s = 0; s < ctx; ++s)
    rope_cos_sin(s, rotation.inv_freq, {&cos[s * kDim / 2], kDim / 2}, {&sin[s * kDim / 2], kDim / 2});
  for (auto _ : state) {
    for (size_t s = 0; s < ctx; ++s) {
      for (size_t h = 0; h < kHeads; ++h) {
        read_kv_row(seq.kv.format().k, seq.kv.keys(0, seq.blocks[s / kBlock], h), s % kBlock, key.data());
        rope_interleaved(key, 1, kDim, {&cos[s * kDim / 2], kDim / 2}, {&sin[s * kDim / 2], kDim / 2});
        benchmark::DoNotOptimize(key.data());
      }
    }
  }
}
BENCHMARK(BM_RotateOnRead)->Name("RotateOnRead")->ArgNames({"ctx"})->Arg(1024)->Arg(4096);

}  // namespace
}  // namespace kvs

BENCHMARK_MAIN();
