// The forward pass's operations on the GPU, one dispatch each, for the shaders' tests against their CPU twins and
// the pieces the GPU forward records (issue 41). Buffers hold fp32 activations; weights stay in the file's type.
#pragma once

#include <map>
#include <memory>

#include "core/dtype.h"
#include "core/kv_dtype.h"
#include "gpu/compute_pipeline.h"

namespace kvs {

class GpuOps {
 public:
  static constexpr uint32_t kNormWorkgroup = 256;
  static constexpr uint32_t kMatvecWorkgroup = 64;  // a whole number of subgroups of every device (8 to 64 lanes)
  static constexpr uint32_t kAttentionWorkgroup = 64;

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
  // x[i] += y[i % period] over n values (shaders/add.comp): the residual add (period 0: n), or a bias of `period`
  // values added to every row.
  Status add(GpuBuffer& x, GpuBuffer& y, uint32_t n, uint32_t period = 0);
  // out[t] = row ids[t] of `table` [rows][cols] in `type` (F32, F16, Q8_0), dequantized (shaders/get_rows.comp).
  Status get_rows(DType type, GpuBuffer& table, GpuBuffer& ids, GpuBuffer& out, uint32_t tokens, uint32_t cols);

  // One layer's K (or V) rows [tokens][kv_heads][width] stored at slots[t] of `pool` ([block][kv_head][slot][width],
  // the host's KvStorage layout) in `element` (f32, f16, bf16: round to nearest even) (shaders/kv_write.comp).
  Status kv_write(KvDType element, GpuBuffer& rows, GpuBuffer& pool, GpuBuffer& slots, uint32_t tokens,
                  uint32_t kv_heads, uint32_t width, uint32_t block_size);

  struct AttentionShape {
    uint32_t heads = 0, kv_heads = 0, head_dim = 0, value_width = 0, block_size = 0;
    uint32_t max_blocks = 0;  // columns of the block-table buffer: [sequence][max_blocks], 0xffffffff a hole
    uint32_t max_slots = 0;   // columns of the scratch: [tokens][heads][max_slots] floats, >= every visible count
    float scale = 1.0f;
  };
  // out [tokens][heads][value_width] = attention of each token's query heads over its visible slots, read through
  // its sequence's block table (shaders/paged_attention.comp). token_info: (sequence, visible slots) per token.
  Status paged_attention(KvDType key, KvDType value, GpuBuffer& q, GpuBuffer& keys, GpuBuffer& values,
                         GpuBuffer& tables, GpuBuffer& token_info, GpuBuffer& scratch, GpuBuffer& out, uint32_t tokens,
                         const AttentionShape& shape);

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
  std::map<KvDType, std::unique_ptr<ComputePipeline>> kv_write_;
  std::map<std::pair<KvDType, KvDType>, std::unique_ptr<ComputePipeline>> attention_;  // built on first use
};

}  // namespace kvs
