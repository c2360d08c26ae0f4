// Views of a model's weights inside its mapped GGUF file, checked against the shapes the config expects (a tensor
// of the wrong shape, rows that are not whole blocks, or a block with a non-finite scale is refused by name), and
// repacking for this CPU's kernels. Every family's weight loader reads its tensors through these.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "tensor/packed_weights.h"
#include "tensor/weight_view.h"

namespace kvs {

// lhs = the value of an Expected expression, or return its status.
#define KVS_TRY_ASSIGN(lhs, expr) \
  do {                            \
    auto r_ = (expr);             \
    if (!r_) return r_.status();  \
    lhs = std::move(*r_);         \
  } while (0)

// A matrix [rows][cols]: GGUF dims {cols, rows}.
Expected<WeightView> load_matrix(const gguf::File& file, const std::string& name, size_t rows, size_t cols);
// `count` matrices [rows][cols] stacked in one tensor (GGUF dims {cols, rows, count}: a layer's experts), one view
// each.
Expected<std::vector<WeightView>> load_matrices(const gguf::File& file, const std::string& name, size_t count,
                                                size_t rows, size_t cols);
// Rows [first, first + count) of a row-major matrix: a view of the same bytes.
WeightView slice_rows(const WeightView& matrix, size_t first, size_t count);
// Columns [first, first + count) of a row-major matrix, copied into `owned` (resized to them); the view points there.
// A range that cuts a quantization block is an error naming the matrix `name`, the range and the block.
Expected<WeightView> slice_columns(const WeightView& matrix, const std::string& name, size_t first, size_t count,
                                   std::vector<std::byte>& owned);
// A vector of n values (norm weights, biases), converted to fp32.
Expected<std::vector<float>> load_vector(const gguf::File& file, const std::string& name, size_t n);

// Replaces the view of a packable type (tensor/packed_weights.h) by a copy packed for this CPU's kernels, owned by
// `storage`. When nothing else reads the file's bytes of the matrix (`release_source`), their pages leave the
// process: resident memory holds one copy, not two. Other types stay as they are.
void pack_for_cpu(WeightView& view, std::vector<PackedMatrix>& storage, const gguf::File& file, bool release_source,
                  ThreadPool& pool);

}  // namespace kvs
