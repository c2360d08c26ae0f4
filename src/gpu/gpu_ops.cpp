#include "gpu/gpu_ops.h"

#include <algorithm>

#include "gpu/shaders.h"

namespace kvs {

Expected<std::unique_ptr<GpuOps>> GpuOps::create(VulkanContext& context) {
  std::unique_ptr<GpuOps> ops(new GpuOps(context));
  const uint32_t norm_constants[] = {kNormWorkgroup};
  auto norm = ComputePipeline::create(context, shaders::rmsnorm(), 3, 2 * sizeof(uint32_t), norm_constants);
  if (!norm) return norm.status();
  ops->rmsnorm_ = std::move(*norm);
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    const uint32_t constants[] = {kMatvecWorkgroup, static_cast<uint32_t>(type)};
    auto matvec = ComputePipeline::create(context, shaders::matvec(), 3, 4 * sizeof(uint32_t), constants);
    if (!matvec) return matvec.status();
    ops->matvec_[type] = std::move(*matvec);
  }
  return ops;
}

Status GpuOps::rmsnorm(GpuBuffer& x, GpuBuffer& w, GpuBuffer& y, uint32_t rows, uint32_t cols, float eps) {
  if (x.bytes() < size_t{rows} * cols * sizeof(float) || w.bytes() < cols * sizeof(float) || y.bytes() < x.bytes()) {
    return Status::invalid_argument(fmt::format("rmsnorm of {} x {} over buffers of {}, {} and {} bytes", rows, cols,
                                                x.bytes(), w.bytes(), y.bytes()));
  }
  GpuBuffer* const buffers[] = {&x, &w, &y};
  rmsnorm_->bind(buffers);
  struct {
    uint32_t cols;
    float eps;
  } push{cols, eps};
  return context_.run([&](VkCommandBuffer c) { rmsnorm_->record(c, &push, rows); });
}

Status GpuOps::matvec(DType type, GpuBuffer& w, GpuBuffer& x, GpuBuffer& y, uint32_t rows, uint32_t cols,
                      uint32_t tokens) {
  const auto pipeline = matvec_.find(type);
  if (pipeline == matvec_.end()) {
    return Status::unimplemented(fmt::format("the GPU matvec does not read {} weights yet", dtype_name(type)));
  }
  if (type == DType::kQ8_0 && cols % 32 != 0) {
    return Status::invalid_argument(fmt::format("Q8_0 rows are whole blocks of 32 values, not {}", cols));
  }
  if (w.bytes() < rows * dtype_row_bytes(type, cols) || x.bytes() < size_t{tokens} * cols * sizeof(float) ||
      y.bytes() < size_t{tokens} * rows * sizeof(float)) {
    return Status::invalid_argument(fmt::format("matvec of {} x {} {} over {} tokens: buffers of {}, {} and {} bytes",
                                                rows, cols, dtype_name(type), tokens, w.bytes(), x.bytes(), y.bytes()));
  }
  GpuBuffer* const buffers[] = {&w, &x, &y};
  pipeline->second->bind(buffers);
  const uint32_t rows_per_group = std::max<uint32_t>(1, kMatvecWorkgroup / context_.info().subgroup_size);
  const uint32_t push[] = {rows, cols, tokens, rows_per_group};
  return context_.run([&](VkCommandBuffer c) {
    pipeline->second->record(c, push, (rows + rows_per_group - 1) / rows_per_group, tokens);
  });
}

}  // namespace kvs
