#include "model/weight_loading.h"

#include <fmt/format.h>

#include <cstring>

#include "tensor/convert.h"

namespace kvs {
namespace {

Status shape_error(const gguf::File& file, const gguf::TensorInfo& t, const std::string& expected) {
  std::string dims;
  for (size_t i = 0; i < t.dims.size(); ++i) dims += (i ? ", " : "") + std::to_string(t.dims[i]);
  return Status::corrupt(fmt::format("{}: tensor '{}' has shape [{}], expected {} from the model config", file.path(),
                                     t.name, dims, expected));
}

Expected<const gguf::TensorInfo*> find(const gguf::File& file, const std::string& name) {
  const auto* t = file.find_tensor(name);
  if (!t) return Status::corrupt(fmt::format("{}: tensor '{}' is missing", file.path(), name));
  return t;
}

// A block-quantized tensor whose blocks' scales are not all finite is corrupt: every value of such a block would be
// inf or NaN. `row_blocks`: blocks per row, to name the row.
Status check_block_scales(const gguf::File& file, const gguf::TensorInfo& t, size_t row_blocks) {
  const auto bad = find_non_finite_block_scale(t.type, t.data);
  if (!bad) return Status::ok();
  return Status::corrupt(fmt::format("{}: tensor '{}' ({}): block {} of row {} has a non-finite {} (fp16 bits {:#06x})",
                                     file.path(), t.name, dtype_name(t.type), bad->block % row_blocks,
                                     bad->block / row_blocks, bad->field, bad->bits));
}

}  // namespace

Expected<WeightView> load_matrix(const gguf::File& file, const std::string& name, size_t rows, size_t cols) {
  auto t = find(file, name);
  if (!t) return t.status();
  const gguf::TensorInfo& info = **t;
  if (info.dims.size() != 2 || info.dims[0] != cols || info.dims[1] != rows) {
    return shape_error(file, info, fmt::format("[{}, {}]", cols, rows));
  }
  if (cols % dtype_block_elements(info.type) != 0) {
    return Status::corrupt(fmt::format("{}: tensor '{}' has rows of {} values, not a multiple of the {} block of {}",
                                       file.path(), name, cols, dtype_name(info.type),
                                       dtype_block_elements(info.type)));
  }
  if (Status s = check_block_scales(file, info, cols / dtype_block_elements(info.type)); !s) return s;
  return WeightView{.type = info.type, .data = info.data.data(), .rows = rows, .cols = cols};
}

Expected<std::vector<float>> load_vector(const gguf::File& file, const std::string& name, size_t n) {
  auto t = find(file, name);
  if (!t) return t.status();
  const gguf::TensorInfo& info = **t;
  if (info.dims.size() != 1 || info.dims[0] != n) return shape_error(file, info, fmt::format("[{}]", n));
  if (n % dtype_block_elements(info.type) != 0) {
    return Status::corrupt(
        fmt::format("{}: tensor '{}' of {} elements cannot be {}", file.path(), name, n, dtype_name(info.type)));
  }
  if (Status s = check_block_scales(file, info, n / dtype_block_elements(info.type)); !s) return s;
  std::vector<float> out(n);
  dequantize_row(info.type, info.data.data(), out.data(), n);
  return out;
}

void pack_for_cpu(WeightView& view, std::vector<PackedMatrix>& storage, const gguf::File& file, bool release_source,
                  ThreadPool& pool) {
  const std::optional<WeightLayout> layout = packed_layout_for(view.type);
  if (!layout) return;
  storage.push_back(PackedMatrix::pack(view, *layout, &pool));
  if (release_source) file.release({view.data, view.bytes()});
  view = storage.back().view();
}

Expected<std::vector<WeightView>> load_matrices(const gguf::File& file, const std::string& name, size_t count,
                                                size_t rows, size_t cols) {
  auto t = find(file, name);
  if (!t) return t.status();
  const gguf::TensorInfo& info = **t;
  if (info.dims.size() != 3 || info.dims[0] != cols || info.dims[1] != rows || info.dims[2] != count) {
    return shape_error(file, info, fmt::format("[{}, {}, {}]", cols, rows, count));
  }
  if (cols % dtype_block_elements(info.type) != 0) {
    return Status::corrupt(fmt::format("{}: tensor '{}' has rows of {} values, not a multiple of the {} block of {}",
                                       file.path(), name, cols, dtype_name(info.type),
                                       dtype_block_elements(info.type)));
  }
  if (Status s = check_block_scales(file, info, cols / dtype_block_elements(info.type)); !s) return s;
  std::vector<WeightView> views(count);
  const size_t matrix_bytes = rows * dtype_row_bytes(info.type, cols);
  for (size_t e = 0; e < count; ++e) {
    views[e] = WeightView{.type = info.type, .data = info.data.data() + e * matrix_bytes, .rows = rows, .cols = cols};
  }
  return views;
}

}  // namespace kvs

namespace kvs {

WeightView slice_rows(const WeightView& m, size_t first, size_t count) {
  KVS_ASSERT(m.layout == WeightLayout::kRows && first + count <= m.rows, "rows {}+{} of a matrix of {}", first, count,
             m.rows);
  return {.type = m.type, .data = m.row(first), .rows = count, .cols = m.cols};
}

Expected<WeightView> slice_columns(const WeightView& m, const std::string& name, size_t first, size_t count,
                                   std::vector<std::byte>& owned) {
  KVS_ASSERT(m.layout == WeightLayout::kRows && first + count <= m.cols, "columns {}+{} of a matrix of {}", first,
             count, m.cols);
  const size_t block = dtype_block_elements(m.type);
  if (first % block != 0 || count % block != 0) {
    return Status::invalid_argument(
        fmt::format("tensor '{}' ({}, blocks of {} values) cannot be split at columns {}-{}: the range cuts a block",
                    name, dtype_name(m.type), block, first, first + count - 1));
  }
  const size_t row_bytes = dtype_row_bytes(m.type, count), skip = dtype_row_bytes(m.type, first);
  owned.resize(m.rows * row_bytes);
  for (size_t r = 0; r < m.rows; ++r) std::memcpy(owned.data() + r * row_bytes, m.row(r) + skip, row_bytes);
  return WeightView{.type = m.type, .data = owned.data(), .rows = m.rows, .cols = count};
}

}  // namespace kvs
