// The forward pass's operations on the GPU, one dispatch each, for the shaders' tests against their CPU twins and
// the pieces the GPU forward records (issue 41). Buffers hold fp32 activations; weights stay in the file's type.
#pragma once

#include <map>
#include <memory>

#include "core/dtype.h"
#include "gpu/compute_pipeline.h"

namespace kvs {

class GpuOps {
 public:
  static constexpr uint32_t kNormWorkgroup = 256;
  static constexpr uint32_t kMatvecWorkgroup = 64;  // a whole number of subgroups of every device (8 to 64 lanes)

  static Expected<std::unique_ptr<GpuOps>> create(VulkanContext& context);

  // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for `rows` rows of `cols` (shaders/rmsnorm.comp).
  Status rmsnorm(GpuBuffer& x, GpuBuffer& w, GpuBuffer& y, uint32_t rows, uint32_t cols, float eps);
  // y[t][r] = sum_c W[r][c] x[t][c]: W [rows][cols] in `type` (F32, F16, Q8_0), x [tokens][cols], y [tokens][rows]
  // (shaders/matvec.comp). Other types: kUnimplemented, naming the type.
  Status matvec(DType type, GpuBuffer& w, GpuBuffer& x, GpuBuffer& y, uint32_t rows, uint32_t cols, uint32_t tokens);

 private:
  explicit GpuOps(VulkanContext& context) : context_(context) {}
  VulkanContext& context_;
  std::unique_ptr<ComputePipeline> rmsnorm_;
  std::map<DType, std::unique_ptr<ComputePipeline>> matvec_;  // per weight type (specialization constant 1)
};

}  // namespace kvs
