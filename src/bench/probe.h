// Machine probes for `kvserve bench`: what the memory system and the FMA units can do, so measured kernel
// speeds can be reported as a fraction of the machine's peak. Each takes tens to hundreds of milliseconds.
#pragma once

#include <cstddef>

#include "core/thread_pool.h"
#include "tensor/isa.h"

namespace kvs {

// Read bandwidth in GB/s (1e9 bytes/s): every thread of the pool streams its own slice of a `bytes`
// buffer (far larger than the caches by default); best of several repetitions.
double measure_memory_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{1} << 30);

// Peak fp32 FMA throughput in GFLOP/s (an FMA counts 2) over all threads of the pool: independent
// accumulator chains at the widest vectors of `isa`; best of several repetitions.
double measure_peak_gflops(ThreadPool& pool, Isa isa = best_isa());

// Peak int8 dot-product throughput in GOP/s (a byte product and its addition count 2) over all threads of the
// pool, with the best instruction sequence of `isa` for what the quantized matmul kernels do (u8 x s8 into
// int32): vpdpbusd on 512 bits (avx512 with VNNI) or 256 (avxvnni), else vpmaddubsw + vpmaddwd + vpaddd; the
// ceiling of their prefill. Scalar: plain int32 multiply-adds.
double measure_peak_int8_gops(ThreadPool& pool, Isa isa = best_isa());

}  // namespace kvs
