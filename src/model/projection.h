// Matrices that read the same input: outs[i] = x . weights[i]^T for n rows of x. When every weight takes int8
// activations (Q8_0/Q4_0/K-quants, mixed freely), x is quantized once for all of them and the matrices run in one
// pass of the pool (tensor/matmul.h matmul_quantized_group); otherwise each runs its own matmul.
#pragma once

#include <initializer_list>
#include <span>
#include <utility>

#include "core/thread_pool.h"
#include "tensor/matmul.h"
#include "tensor/weight_view.h"

namespace kvs {

void project(std::span<const float> x, size_t n, std::initializer_list<std::pair<const WeightView*, float*>> outs,
             ThreadPool& pool, QuantizedActivations& xq, MatmulScratch& scratch);

}  // namespace kvs
