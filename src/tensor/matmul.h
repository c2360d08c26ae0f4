// Products of a weight matrix with activations: the hot path of prefill and decode.
#pragma once

#include <cstddef>
#include <span>

#include "core/thread_pool.h"
#include "tensor/isa.h"
#include "tensor/weight_view.h"

namespace kvs {

// y[t][r] = sum_c w[r][c] * x[t][c] for t in [0, n_tokens), r in [0, w.rows).
// x: [n_tokens][w.cols] fp32, y: [n_tokens][w.rows] fp32. n_tokens == 1 is decode (matrix-vector).
// Work is split over the pool's threads by output rows.
void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
            ThreadPool& pool, Isa isa = best_isa());

// Single-threaded, for output rows [row_begin, row_end) only (what each thread runs).
void matmul_rows(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y,
                 size_t row_begin, size_t row_end, Isa isa);

}  // namespace kvs
