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
  // RoPE in place over `tokens` rows of `heads` heads of `head_dim`, by cos/sin [tokens][half] (shaders/rope.comp):
  // pairs (2i, 2i + 1), or (i, i + half) when neox.
  Status rope(GpuBuffer& x, GpuBuffer& cos, GpuBuffer& sin, uint32_t tokens, uint32_t heads, uint32_t head_dim,
              uint32_t half, bool neox);
  // gate = silu(gate) * up over n values (shaders/swiglu.comp).
  Status swiglu(GpuBuffer& gate, GpuBuffer& up, uint32_t n);
  // x += y over n values (shaders/add.comp).
  Status add(GpuBuffer& x, GpuBuffer& y, uint32_t n);
  // out[t] = row ids[t] of `table` [rows][cols] in `type` (F32, F16, Q8_0), dequantized (shaders/get_rows.comp).
  Status get_rows(DType type, GpuBuffer& table, GpuBuffer& ids, GpuBuffer& out, uint32_t tokens, uint32_t cols);

 private:
  explicit GpuOps(VulkanContext& context) : context_(context) {}
  VulkanContext& context_;
  static constexpr uint32_t kElementwise = 256;  // the workgroup of the one-invocation-a-value shaders
  // One dispatch of `pipeline` over `buffers` with `push`, groups_x x groups_y workgroups.
  Status dispatch(ComputePipeline& pipeline, std::span<GpuBuffer* const> buffers, const void* push, uint32_t groups_x,
                  uint32_t groups_y = 1);
  static uint32_t groups_for(size_t n) { return static_cast<uint32_t>((n + kElementwise - 1) / kElementwise); }

  std::unique_ptr<ComputePipeline> rmsnorm_, rope_, rope_neox_, swiglu_, add_;
  std::map<DType, std::unique_ptr<ComputePipeline>> matvec_, get_rows_;  // per weight type (specialization 1)
};

}  // namespace kvs
