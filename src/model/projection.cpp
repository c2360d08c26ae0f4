#include "model/projection.h"

#include <vector>

namespace kvs {

void project(std::span<const float> x, size_t n, std::initializer_list<std::pair<const WeightView*, float*>> outs,
             ThreadPool& pool, QuantizedActivations& xq, MatmulScratch& scratch) {
  bool all_int8 = true;
  for (const auto& [w, y] : outs) {
    all_int8 = all_int8 && matmul_activations(w->type, best_isa()) == MatmulActivations::kInt8Blocks;
  }
  const size_t cols = outs.begin()->first->cols;
  if (all_int8) {
    quantize_activations(x.first(n * cols), n, cols, xq, pool);
    std::vector<QuantizedMatmul> group;
    for (const auto& [w, y] : outs) group.push_back({.w = w, .y = {y, n * w->rows}});
    matmul_quantized_group(group, xq, pool);
    return;
  }
  for (const auto& [w, y] : outs) matmul(*w, x.first(n * cols), n, {y, n * w->rows}, pool, scratch);
}

}  // namespace kvs
