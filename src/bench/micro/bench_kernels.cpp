// Micro benchmarks of the tensor kernels. Matrix products report bytes/s of weights streamed and FLOP/s
// (2 per multiply-add); the probes report the machine's read bandwidth and fp32 FMA peak in the same run,
// so kernel numbers can be read as fractions of peak. The Isa argument is 0 scalar, 1 avx2, 2 avx512.
//   bench_kernels --benchmark_filter='Matvec|Probe'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include "attention/batch_attention.h"
#include "attention/latent_bf16_attention.h"
#include "attention/paged_attention.h"
#include "attention/write_kv.h"
#include "bench/probe.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "tensor/attention_ops.h"
#include "tensor/convert.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"
#include "tensor/packed_weights.h"

namespace kvs {
namespace {

// Type indices 5, 11, 12, 13 and 14 are Q8_0, Q4_0, Q4_K, Q6_K and Q5_K packed for the ISA's kernel
// (tensor/packed_weights.h: groups of 16 rows on avx512, of 8 on avx2 and avxvnni), as the model loads them; 6-10 are
// the K-quants in the file layout; 15 and 16 are F16 and BF16 in float panels (tensor/float_panels.h: 16 rows on
// avx512, 8 on avx2), as the model loads them, against 1 and 2 in the file layout.
constexpr DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ8_0,
                            DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_0,
                            DType::kQ4_K, DType::kQ6_K, DType::kQ5_K, DType::kF16,  DType::kBF16};
constexpr int64_t kPackedQ8 = 5, kPackedQ4 = 11, kPackedQ4K = 12, kPackedQ6K = 13, kPackedQ5K = 14, kPanelF16 = 15,
                  kPanelBF16 = 16;
bool is_packed_index(int64_t index) {
  return index == kPackedQ8 || index == kPackedQ4 || index == kPackedQ4K || index == kPackedQ5K ||
         index == kPackedQ6K || index == kPanelF16 || index == kPanelBF16;
}
constexpr int64_t kTypeCount = std::size(kTypes);

struct Matrix {
  std::vector<std::byte> data;  // row-major blocks (kept when packed: more packed copies are made from them)
  WeightView rows_view;         // of data
  PackedMatrix packed;
  WeightView view;  // what the kernels read: rows_view, or packed's
};

std::string type_label(int64_t index, Isa isa) {
  if (!is_packed_index(index)) return std::string(dtype_name(kTypes[index]));
  const auto layout = packed_layout_for(kTypes[index], isa);
  return layout ? weight_layout_name(*layout) : "packed (none)";
}

// Skips the benchmark (and says why) when the CPU cannot run it.
bool runnable(benchmark::State& state, int64_t type_index, Isa isa) {
  if (!isa_supported(isa)) {
    state.SkipWithError("isa not supported on this CPU");
    return false;
  }
  if (is_packed_index(type_index) && !packed_layout_for(kTypes[type_index], isa)) {
    state.SkipWithError("no packed kernel on this isa");
    return false;
  }
  return true;
}

Matrix random_matrix(int64_t type_index, size_t rows, size_t cols, Isa isa) {
  const DType type = kTypes[type_index];
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Matrix m;
  const size_t row_bytes = dtype_row_bytes(type, cols);
  m.data.resize(rows * row_bytes);
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    for (float& v : row) v = u(rng);
    quantize_row(type, row.data(), m.data.data() + r * row_bytes, cols);
  }
  m.view = {.type = type, .data = m.data.data(), .rows = rows, .cols = cols};
  m.rows_view = m.view;
  if (is_packed_index(type_index)) {
    m.packed = PackedMatrix::pack(m.view, *packed_layout_for(type, isa));
    m.view = m.packed.view();
  }
  return m;
}

std::vector<float> random_vector(size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// 0 scalar, 1 avx2, 2 avx512, 3 avxvnni.
Isa isa_arg(int64_t v) { return v == 0 ? Isa::kScalar : v == 1 ? Isa::kAvx2 : v == 2 ? Isa::kAvx512 : Isa::kAvxVnni; }

// Args: dtype index, rows, cols, tokens, threads, isa.
void BM_Matmul(benchmark::State& state) {
  const size_t rows = state.range(1), cols = state.range(2), n = state.range(3);
  const Isa isa = isa_arg(state.range(5));
  if (!runnable(state, state.range(0), isa)) return;
  ThreadPool pool(state.range(4));
  const Matrix w = random_matrix(state.range(0), rows, cols, isa);
  const std::vector<float> x = random_vector(n * cols);
  std::vector<float> y(n * rows);
  MatmulScratch scratch;
  for (auto _ : state) {
    matmul(w.view, x, n, y, pool, scratch, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(type_label(state.range(0), isa) + " " + std::string(isa_name(isa)));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.view.bytes()));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * rows * cols * n * state.iterations(), benchmark::Counter::kIsRate);
}

void MatvecArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "rows", "cols", "n", "threads", "isa"});
  for (int64_t t = 0; t < kTypeCount; ++t)
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}})
      for (int64_t threads : {1, 2}) b->Args({t, rows, cols, 1, threads, 2});
  for (int64_t t = 0; t < kTypeCount; ++t) b->Args({t, 2048, 2048, 1, 1, 1});  // avx2
  for (int64_t t : {kPackedQ8, kPackedQ4, kPackedQ4K, kPackedQ5K, kPackedQ6K})
    b->Args({t, 2048, 2048, 1, 1, 3});                                // avxvnni
  for (int64_t t = 0; t < 5; ++t) b->Args({t, 2048, 2048, 1, 1, 0});  // scalar baseline
}
BENCHMARK(BM_Matmul)->Name("Matvec")->Apply(MatvecArgs)->UseRealTime();

// Decode as in a real model: the weights come from DRAM, not from a cache that kept them since the last
// iteration. Rotates over enough copies of the matrix to overflow the last-level cache (256 MiB in all).
// Args: dtype index, rows, cols, threads, isa.
void BM_MatvecCold(benchmark::State& state) {
  const size_t rows = state.range(1), cols = state.range(2);
  const Isa isa = isa_arg(state.range(4));
  if (!runnable(state, state.range(0), isa)) return;
  ThreadPool pool(state.range(3));
  const size_t bytes = rows * dtype_row_bytes(kTypes[state.range(0)], cols);
  const size_t copies = std::max<size_t>(1, (size_t{256} << 20) / bytes);
  std::vector<Matrix> w;
  w.push_back(random_matrix(state.range(0), rows, cols, isa));
  for (size_t c = 1; c < copies; ++c) {  // the same bytes elsewhere (quantizing K-quants again takes minutes)
    if (is_packed_index(state.range(0))) {
      Matrix m;
      m.packed = PackedMatrix::pack(w[0].rows_view, w[0].view.layout);
      m.view = m.packed.view();
      w.push_back(std::move(m));
      continue;
    }
    Matrix m;
    m.data = w[0].data;
    m.view = w[0].view;
    m.view.data = m.data.data();
    w.push_back(std::move(m));
  }
  const std::vector<float> x = random_vector(cols);
  std::vector<float> y(rows);
  MatmulScratch scratch;
  size_t i = 0;
  for (auto _ : state) {
    matmul(w[i++ % copies].view, x, 1, y, pool, scratch, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(type_label(state.range(0), isa) + " " + std::string(isa_name(isa)));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w[0].view.bytes()));
}
BENCHMARK(BM_MatvecCold)
    ->Name("MatvecCold")
    ->ArgNames({"type", "rows", "cols", "threads", "isa"})
    ->ArgsProduct({{0, 1, 2, 3, 4, kPackedQ8, 6, 7, 8, 9, 10, kPackedQ4, kPackedQ4K, kPackedQ5K, kPackedQ6K, kPanelF16,
                    kPanelBF16},
                   {5632},
                   {2048},
                   {1, 2},
                   {1, 2, 3}})
    ->UseRealTime();
// A mixture-of-experts model's expert matrices (DeepSeek-V2-Lite: 1408 x 2048) against the rows above: what the
// shorter streams cost.
BENCHMARK(BM_MatvecCold)
    ->Name("MatvecColdExpert")
    ->ArgNames({"type", "rows", "cols", "threads", "isa"})
    ->ArgsProduct({{kPackedQ8, kPackedQ4, kPackedQ4K}, {1408, 5632}, {2048}, {2}, {2}})
    ->UseRealTime();

void MatmulArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "rows", "cols", "n", "threads", "isa"});
  for (int64_t n : {16, 128})  // 16: a batched decode step of 16 sequences; 128: a prefill chunk
    for (int64_t t = 0; t < kTypeCount; ++t)
      for (int64_t threads : {1, 2}) b->Args({t, 2048, 2048, n, threads, 2});
  for (int64_t t = 0; t < kTypeCount; ++t) b->Args({t, 2048, 2048, 128, 1, 1});
  for (int64_t t : {int64_t{1}, int64_t{2}, kPanelF16, kPanelBF16})
    b->Args({t, 2048, 2048, 512, 2, 2});  // a 512-token prefill
  for (int64_t t : {int64_t{1}, int64_t{2}, kPanelF16, kPanelBF16}) b->Args({t, 2048, 2048, 512, 2, 1});
  for (int64_t t : {kPackedQ8, kPackedQ4, kPackedQ4K, kPackedQ5K, kPackedQ6K}) b->Args({t, 2048, 2048, 128, 1, 3});
}
BENCHMARK(BM_Matmul)->Name("Matmul")->Apply(MatmulArgs)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Rmsnorm(benchmark::State& state) {
  const size_t n = state.range(0);
  const Isa isa = isa_arg(state.range(1));
  std::vector<float> x = random_vector(n), w = random_vector(n, 0.5f, 1.5f), out(n);
  for (auto _ : state) {
    rmsnorm(out, x, w, 1e-5f, isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(3 * n * sizeof(float)));
}
BENCHMARK(BM_Rmsnorm)->ArgNames({"n", "isa"})->ArgsProduct({{4096}, {0, 1, 2}});

void BM_Softmax(benchmark::State& state) {
  const size_t n = state.range(0);
  const Isa isa = isa_arg(state.range(1));
  const std::vector<float> x0 = random_vector(n, -10.0f, 10.0f);
  std::vector<float> x(n);
  for (auto _ : state) {
    x = x0;
    softmax(x, isa);
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Softmax)->ArgNames({"n", "isa"})->ArgsProduct({{1024, 32768}, {0, 1, 2}});

void BM_Swiglu(benchmark::State& state) {
  const size_t n = state.range(0);
  const Isa isa = isa_arg(state.range(1));
  const std::vector<float> g0 = random_vector(n, -6.0f, 6.0f), up = random_vector(n);
  std::vector<float> g(n);
  for (auto _ : state) {
    g = g0;
    swiglu(g, up, isa);
    benchmark::DoNotOptimize(g.data());
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Swiglu)->ArgNames({"n", "isa"})->ArgsProduct({{5632}, {0, 1, 2}});

void BM_Dot(benchmark::State& state) {
  const size_t n = state.range(0);
  const Isa isa = isa_arg(state.range(1));
  const std::vector<float> a = random_vector(n), b = random_vector(n);
  for (auto _ : state) benchmark::DoNotOptimize(dot_f32(a.data(), b.data(), n, isa));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * n * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Dot)->ArgNames({"n", "isa"})->ArgsProduct({{128, 4096}, {0, 1, 2}});

// Decode attention of one KV head as the engine runs it (src/attention/paged_attention.cpp): `group` query
// heads of head_dim 128 against `ctx` cached positions in blocks of 16: block scores, softmax per head,
// block value sums.
void BM_AttentionKvHead(benchmark::State& state) {
  const size_t ctx = state.range(0), group = state.range(1), dim = 128, block = 16;
  const Isa isa = isa_arg(state.range(2));
  const std::vector<float> q = random_vector(group * dim), k = random_vector(ctx * dim), v = random_vector(ctx * dim);
  std::vector<float> scores(group * ctx), out(group * dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (auto _ : state) {
    for (size_t first = 0; first < ctx; first += block) {
      attention_block_scores(q.data(), group, k.data() + first * dim, std::min(block, ctx - first), dim, scale,
                             &scores[first], ctx, isa);
    }
    for (size_t h = 0; h < group; ++h) softmax(std::span(scores).subspan(h * ctx, ctx), isa);
    std::fill(out.begin(), out.end(), 0.0f);
    for (size_t first = 0; first < ctx; first += block) {
      attention_block_values(&scores[first], ctx, group, v.data() + first * dim, std::min(block, ctx - first), dim,
                             out.data(), isa);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * ctx * dim * sizeof(float)));
  state.counters["FLOP/s"] =
      benchmark::Counter(4.0 * group * ctx * dim * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionKvHead)->ArgNames({"ctx", "group", "isa"})->ArgsProduct({{512, 4096}, {1, 8}, {0, 1, 2}});

// Decode attention of one KV head through the paged path (attention/paged_attention.h) over a real KV
// storage of each KV type: 8 query heads of head dim 64 (the 1B shape) against `ctx` positions in blocks
// of 16, keys per channel. The kernels are the CPU's best (KVS_ISA limits them). Bytes: the K/V read.
constexpr KvDTypes kKvTypes[] = {KvDType::kF16,
                                 KvDType::kInt8,
                                 KvDType::kInt4,
                                 {KvDType::kInt8, KvDType::kInt4},
                                 {KvDType::kInt8, KvDType::kF16},
                                 {KvDType::kInt4, KvDType::kF16}};

void BM_PagedAttentionKvType(benchmark::State& state) {
  const size_t ctx = state.range(0), group = 8, dim = 64, block = 16;
  const KvCacheSpec spec{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = dim, .dtype = kKvTypes[state.range(1)], .block_size = block};
  KvStorage kv(spec, ctx / block);
  const std::vector<float> k = random_vector(ctx * dim), v = random_vector(ctx * dim), q = random_vector(group * dim);
  std::vector<BlockId> blocks;
  for (size_t b = 0; b < ctx / block; ++b) {
    blocks.push_back(BlockId{static_cast<uint32_t>(b)});
    write_kv_run(kv, 0, KvSlot{b * block}, block, {&k[b * block * dim], block * dim},
                 {&v[b * block * dim], block * dim});
  }
  std::vector<float> scores(group * ctx), out(group * dim);
  const AttentionShape shape{.num_heads = group, .num_kv_heads = 1, .head_dim = dim};
  for (auto _ : state) {
    paged_attention(kv, 0, {.blocks = blocks, .num_slots = ctx}, shape, q.data(), out.data(), 0, 1, scores);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(kv_dtypes_name(spec.dtype));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kv.bytes()));
}
BENCHMARK(BM_PagedAttentionKvType)->ArgNames({"ctx", "kv"})->ArgsProduct({{1024, 4096}, {0, 1, 2, 3, 4, 5}});

// Absorbed MLA decode attention of one token through BatchAttention (the engine's split over threads): DeepSeek-V2's
// 16 query heads over a latent of 512 + 64 values a slot (its own value), `ctx` slots in blocks of 16, latent of each
// floating type and int8. FLOP/s counts the multiply-adds of scores (16 x 576 a slot) and values (16 x 576). At 4,096
// slots the latent (4.7 MB in f16) stays in the last-level cache between iterations unless `cold` evicts it before
// each (untimed), as a model's weights streaming through the cache between one layer's attention and the next do; at
// 32,768 (38 MB) it cannot stay. bf16 = 1: bf16 latents through LatentBf16Attention (bf16 products, each token's slots
// split between the threads) where this CPU has a kernel for it.
constexpr KvDType kLatentTypes[] = {KvDType::kF16, KvDType::kBF16, KvDType::kInt8};

void BM_MlaLatentAttention(benchmark::State& state) {
  const size_t ctx = state.range(0), heads = 16, rank = 512, rope = 64, width = rank + rope, block = 16;
  const KvCacheSpec spec{.num_layers = 1,
                         .mla = true,
                         .kv_lora_rank = rank,
                         .rope_dim = rope,
                         .dtype = {kLatentTypes[state.range(1)], kLatentTypes[state.range(1)]},
                         .key_scale_axis = KvScaleAxis::kPerToken,
                         .block_size = block};
  KvStorage kv(spec, ctx / block);
  const std::vector<float> latent = random_vector(ctx * width), q = random_vector(heads * width);
  std::vector<BlockId> blocks;
  for (size_t b = 0; b < ctx / block; ++b) {
    blocks.push_back(BlockId{static_cast<uint32_t>(b)});
    write_kv_run(kv, 0, KvSlot{b * block}, block, {&latent[b * block * width], block * width}, {});
  }
  ThreadPool pool(state.range(2));
  const AttentionShape shape{.num_heads = heads, .num_kv_heads = 1, .head_dim = width};
  BatchAttention attention(pool, shape);
  // bf16: the latent attention with bf16 products (AMX or vdpbf16ps) the model runs over bf16 latents.
  const bool bf16_products = state.range(4) != 0;
  LatentBf16Attention bf16_attention(pool, shape);
  const SequenceAttention sequence{.blocks = blocks, .num_cached = static_cast<uint32_t>(ctx)};
  const uint32_t sequence_of_token = 0, visible = static_cast<uint32_t>(ctx);
  const AttentionBatch batch{
      .sequences = {&sequence, 1}, .sequence_of_token = {&sequence_of_token, 1}, .visible_slots = {&visible, 1}};
  std::vector<float> out(heads * width);
  const bool cold = state.range(3) != 0;
  if (bf16_products && !bf16_attention.applies(kv, batch, 0)) {
    state.SkipWithError("no bf16 latent kernel on this CPU");
    return;
  }
  std::vector<char> flush(cold ? size_t{256} << 20 : 0);  // larger than any last-level cache
  for (auto _ : state) {
    if (cold) {  // untimed: evict the latent, as a model's weights do between one layer and the next
      state.PauseTiming();
      std::fill(flush.begin(), flush.end(), static_cast<char>(state.iterations()));
      benchmark::ClobberMemory();
      state.ResumeTiming();
    }
    if (bf16_products) {
      bf16_attention.run(kv, 0, batch, q, out);
    } else {
      attention.run(kv, 0, batch, q, out);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(kv_dtype_name(spec.dtype.k)) + (cold ? " cold" : "") +
                 (bf16_products ? std::string(" ") + std::string(latent_kernel_name(*best_latent_kernel())) : ""));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kv.bytes()));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * 2 * heads * width * ctx * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlaLatentAttention)
    ->ArgNames({"ctx", "kv", "threads", "cold", "bf16"})
    ->ArgsProduct({{4096}, {0, 1, 2}, {1, 2}, {0, 1}, {0}})
    ->ArgsProduct({{32768}, {0, 1, 2}, {1, 2}, {0}, {0}})
    ->ArgsProduct({{512, 4096}, {1}, {1, 2}, {0, 1}, {1}})
    ->ArgsProduct({{32768}, {1}, {1, 2}, {0}, {1}})
    ->UseRealTime();

// The key and the value kernel alone, on one block of 16 rows of each KV type (keys per channel).
void BM_BlockKernelsKvType(benchmark::State& state) {
  const size_t group = 8, dim = 64, block = 16;
  const bool values = state.range(1) != 0;
  const KvCacheSpec spec{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = dim, .dtype = kKvTypes[state.range(0)], .block_size = block};
  KvStorage kv(spec, 1);
  const std::vector<float> k = random_vector(block * dim), v = random_vector(block * dim),
                           q = random_vector(group * dim);
  write_kv_run(kv, 0, KvSlot{0}, block, k, v);
  std::vector<float> scores(group * block, 1.0f / block), out(group * dim);
  const float scale = 0.125f;
  for (auto _ : state) {
    if (values) {
      attention_block_values(scores.data(), block, group, kv.values(0, BlockId{0}, 0), block, dim, out.data());
    } else {
      attention_block_scores(q.data(), group, kv.keys(0, BlockId{0}, 0), block, dim, scale, scores.data(), block);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(scores.data());
  }
  state.SetLabel(kv_dtypes_name(spec.dtype) + (values ? " values" : " keys"));
}
BENCHMARK(BM_BlockKernelsKvType)->ArgNames({"kv", "values"})->ArgsProduct({{0, 1, 2}, {0, 1}});

void BM_ProbePeakFlops(benchmark::State& state) {
  ThreadPool pool(state.range(0));
  double gflops = 0.0;
  for (auto _ : state) gflops = measure_peak_gflops(pool, best_isa());
  state.counters["GFLOP/s"] = gflops;
}
BENCHMARK(BM_ProbePeakFlops)->Name("ProbePeakFlops")->ArgNames({"threads"})->Arg(1)->Arg(2)->Iterations(1);

void BM_ProbeBandwidth(benchmark::State& state) {
  ThreadPool pool(state.range(0));
  double gbs = 0.0;
  for (auto _ : state) gbs = measure_memory_bandwidth_gbs(pool, size_t{512} << 20);
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_ProbeBandwidth)->Name("ProbeBandwidth")->ArgNames({"threads"})->Arg(1)->Arg(2)->Iterations(1);

}  // namespace
}  // namespace kvs

BENCHMARK_MAIN();
