// Per-ISA inner loops of the probes (probe.cpp times them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvs::detail {

// Reads n bytes (n % 256 == 0, p 64-byte aligned); returns a value that depends on all of them.
uint64_t read_bytes_avx2(const std::byte* p, size_t n);
uint64_t read_bytes_avx512(const std::byte* p, size_t n);

// `iters` rounds of kFmaChains (AVX2: kFmaChainsAvx2) independent vector FMAs; returns a value that depends on all of
// them. AVX2 has 16 ymm registers: 16 chains and the two operands spilled three chains to the stack, whose
// store-to-load round trips slowed every round (the probe read 0.53x the AVX2 kernels' real peak on an AMD EPYC).
inline constexpr int kFmaChains = 16;
inline constexpr int kFmaChainsAvx2 = 12;
float fma_loop_avx2(size_t iters, float seed);    // 8 lanes per FMA
float fma_loop_avx512(size_t iters, float seed);  // 16 lanes per FMA

// `iters` rounds of kFmaChains (AVX2 without VNNI: kDotChainsAvx2) independent int8 dot-product steps into int32 (u8 x
// s8 byte products, 4 per int32 lane), the quantized matmul kernels' inner step: vpdpbusd where the CPU has it, else
// vpmaddubsw + vpmaddwd + vpaddd. Returns a value that depends on all of them.
inline constexpr size_t kDotMacsAvx2 = 32, kDotMacsAvx512 = 64;  // byte products per step
// AVX2's step is three instructions with a weight register per chain: 6 chains, 6 weights and the activations, the
// ones and their increment fit the 16 ymm registers (with 12 or 16 chains GCC spilled the accumulators, and the
// probe read 0.6-0.9x of the 6-chain rate); its sums' chains are one add deep, so 6 keep the multipliers busy.
inline constexpr int kDotChainsAvx2 = 6;
int32_t dot_loop_avx2(size_t iters, int32_t seed);
int32_t dot_loop_avxvnni(size_t iters, int32_t seed);
int32_t dot_loop_avx512(size_t iters, int32_t seed);  // needs AVX512_VNNI

}  // namespace kvs::detail
