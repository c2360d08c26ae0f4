// Per-ISA inner loops of the probes (probe.cpp times them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvs::detail {

// Reads n bytes (n % 256 == 0, p 64-byte aligned); returns a value that depends on all of them.
uint64_t read_bytes_avx2(const std::byte* p, size_t n);
uint64_t read_bytes_avx512(const std::byte* p, size_t n);

// `iters` rounds of kFmaChains independent vector FMAs; returns a value that depends on all of them.
inline constexpr int kFmaChains = 16;
float fma_loop_avx2(size_t iters, float seed);    // 8 lanes per FMA
float fma_loop_avx512(size_t iters, float seed);  // 16 lanes per FMA

}  // namespace kvs::detail
