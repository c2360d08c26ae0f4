#include "bench/probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "bench/probe_internal.h"
#include "core/aligned_buffer.h"
#include "tensor/cpu_features.h"

namespace kvs {
namespace {

constexpr int kRepetitions = 5;

uint64_t read_bytes_scalar(const std::byte* p, size_t n) {
  const auto* v = reinterpret_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i < n / 8; i += 4) {
    a ^= v[i];
    b ^= v[i + 1];
    c ^= v[i + 2];
    d ^= v[i + 3];
  }
  return a ^ b ^ c ^ d;
}

float fma_loop_scalar(size_t iters, float seed) {
  float acc[detail::kFmaChains];
  for (int k = 0; k < detail::kFmaChains; ++k) acc[k] = seed + static_cast<float>(k);
  for (size_t i = 0; i < iters; ++i)
    for (float& a : acc) a = a * 0.999999f + 1e-6f;
  float s = 0.0f;
  for (float a : acc) s += a;
  return s;
}

int32_t dot_loop_scalar(size_t iters, int32_t seed) {
  uint32_t acc[detail::kFmaChains];  // unsigned: the sums wrap
  for (int k = 0; k < detail::kFmaChains; ++k) acc[k] = static_cast<uint32_t>(seed + k);
  for (size_t i = 0; i < iters; ++i)
    for (uint32_t& a : acc) a = a * 3u + static_cast<uint32_t>(i);
  uint32_t s = 0;
  for (uint32_t a : acc) s ^= a;
  return static_cast<int32_t>(s);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best (shortest) wall time of fn over the pool.
template <class Fn>
double best_seconds(ThreadPool& pool, const Fn& fn) {
  double best = 1e30;
  for (int rep = 0; rep <= kRepetitions; ++rep) {  // rep 0 warms up
    const auto start = std::chrono::steady_clock::now();
    pool.run(fn);
    const double s = seconds_since(start);
    if (rep > 0) best = std::min(best, s);
  }
  return best;
}

}  // namespace

double measure_memory_bandwidth_gbs(ThreadPool& pool, size_t bytes) {
  const size_t threads = pool.num_threads();
  const size_t slice = std::max<size_t>(bytes / threads / 256 * 256, 256);
  // Zero-filled, so every page is touched once. Huge pages, like the packed weights and the KV pool, so the
  // ceiling is measured on the same kind of memory that decode streams.
  AlignedBuffer<std::byte> buffer(slice * threads, PageHint::kHuge);
  const Isa isa = best_isa();
  std::atomic<uint64_t> sink{0};
  const double seconds = best_seconds(pool, [&](size_t t, size_t) {
    const std::byte* p = buffer.data() + t * slice;
    const uint64_t v = isa == Isa::kAvx512 ? detail::read_bytes_avx512(p, slice)
                       : isa >= Isa::kAvx2 ? detail::read_bytes_avx2(p, slice)
                                           : read_bytes_scalar(p, slice);
    sink.fetch_xor(v, std::memory_order_relaxed);
  });
  return static_cast<double>(slice * threads) / seconds * 1e-9;
}

double measure_peak_gflops(ThreadPool& pool, Isa isa) {
  const size_t lanes = isa == Isa::kAvx512 ? 16 : isa >= Isa::kAvx2 ? 8 : 1;
  const size_t iters = isa == Isa::kScalar ? (size_t{1} << 20) : (size_t{1} << 22);
  std::atomic<uint32_t> sink{0};
  const double seconds = best_seconds(pool, [&](size_t t, size_t) {
    const float seed = static_cast<float>(t);
    const float v = isa == Isa::kAvx512 ? detail::fma_loop_avx512(iters, seed)
                    : isa >= Isa::kAvx2 ? detail::fma_loop_avx2(iters, seed)
                                        : fma_loop_scalar(iters, seed);
    sink.fetch_add(static_cast<uint32_t>(v), std::memory_order_relaxed);
  });
  const size_t chains = isa == Isa::kAvx512 || isa == Isa::kScalar ? detail::kFmaChains : detail::kFmaChainsAvx2;
  const double flops = 2.0 * static_cast<double>(iters) * chains * lanes * pool.num_threads();
  return flops / seconds * 1e-9;
}

double measure_peak_int8_gops(ThreadPool& pool, Isa isa) {
  const bool avx512 = isa == Isa::kAvx512 && cpu_has_avx512_vnni();
  const bool avxvnni = !avx512 && isa >= Isa::kAvxVnni && cpu_supports_isa(Isa::kAvxVnni);
  const size_t macs = avx512 ? detail::kDotMacsAvx512 : isa >= Isa::kAvx2 ? detail::kDotMacsAvx2 : 1;
  const size_t iters = isa == Isa::kScalar ? (size_t{1} << 20) : (size_t{1} << 22);
  std::atomic<int32_t> sink{0};
  const double seconds = best_seconds(pool, [&](size_t t, size_t) {
    const auto seed = static_cast<int32_t>(t);
    const int32_t v = avx512              ? detail::dot_loop_avx512(iters, seed)
                      : avxvnni           ? detail::dot_loop_avxvnni(iters, seed)
                      : isa >= Isa::kAvx2 ? detail::dot_loop_avx2(iters, seed)
                                          : dot_loop_scalar(iters, seed);
    sink.fetch_xor(v, std::memory_order_relaxed);
  });
  const size_t chains = avx512 || avxvnni || isa == Isa::kScalar ? detail::kFmaChains : detail::kDotChainsAvx2;
  const double ops = 2.0 * static_cast<double>(iters) * chains * macs * pool.num_threads();
  return ops / seconds * 1e-9;
}

}  // namespace kvs
