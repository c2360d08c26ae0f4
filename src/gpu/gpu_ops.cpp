#include "gpu/gpu_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "gpu/gpu_ops_internal.h"
#include "gpu/key_groups.h"
#include "gpu/shaders.h"

namespace kvs {

using gpu_ops_internal::element_code;
using gpu_ops_internal::make;

namespace {

// The weight types matvec.comp and get_rows.comp read (shaders/dequant.glsl): every type the CPU loads.
bool gpu_reads_weights(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kBF16 || is_block_quantized(type);
}

// Rows of a block type are whole blocks: the message when `cols` is not.
Status check_whole_blocks(DType type, uint32_t cols) {
  const size_t block = dtype_block_elements(type);
  if (cols % block == 0) return Status::ok();
  return Status::invalid_argument(
      fmt::format("{} rows are whole blocks of {} values, not {}", dtype_name(type), block, cols));
}

}  // namespace

Expected<std::unique_ptr<GpuOps>> GpuOps::create(VulkanContext& context) {
  std::unique_ptr<GpuOps> ops(new GpuOps(context));
  auto recorder = GpuRecorder::create(context);
  if (!recorder) return recorder.status();
  ops->recorder_ = std::move(*recorder);
  KVS_RETURN_IF_ERROR(make(context, shaders::rmsnorm(), 3, 3, {kNormWorkgroup}, ops->rmsnorm_));
  KVS_RETURN_IF_ERROR(make(context, shaders::rope(), 3, 5, {kElementwise, 0}, ops->rope_));
  KVS_RETURN_IF_ERROR(make(context, shaders::rope(), 3, 5, {kElementwise, 1}, ops->rope_neox_));
  KVS_RETURN_IF_ERROR(make(context, shaders::glu(), 2, 1, {kElementwise, 0}, ops->swiglu_));
  KVS_RETURN_IF_ERROR(make(context, shaders::glu(), 2, 1, {kElementwise, 1}, ops->geglu_));
  KVS_RETURN_IF_ERROR(make(context, shaders::scale(), 1, 2, {kElementwise}, ops->scale_));
  KVS_RETURN_IF_ERROR(make(context, shaders::add(), 2, 2, {kElementwise}, ops->add_));
  KVS_RETURN_IF_ERROR(make(context, shaders::hadamard(), 1, 3, {kElementwise}, ops->hadamard_));
  for (KvDType element : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kInt8, KvDType::kInt4}) {
    KVS_RETURN_IF_ERROR(
        make(context, shaders::kv_write(), 3, 7, {kElementwise, element_code(element)}, ops->kv_write_[element]));
    KVS_RETURN_IF_ERROR(
        make(context, shaders::kv_read(), 3, 9, {kElementwise, element_code(element)}, ops->kv_read_[element]));
  }
  KVS_RETURN_IF_ERROR(make(context, shaders::key_tail_write(), 4, 7, {kElementwise}, ops->key_tail_write_));
  KVS_RETURN_IF_ERROR(make(context, shaders::slot_mass(), 5, 5, {kSlotMassWorkgroup}, ops->slot_mass_));
  KVS_RETURN_IF_ERROR(make(context, shaders::copy(), 2, 9, {kElementwise}, ops->copy_));
  KVS_RETURN_IF_ERROR(make(context, shaders::moe_route(), 3, 6, {kRouteWorkgroup}, ops->moe_route_));
  KVS_RETURN_IF_ERROR(make(context, shaders::moe_combine(), 4, 4, {kElementwise}, ops->moe_combine_));
  for (KvDType element : {KvDType::kInt8, KvDType::kInt4}) {
    KVS_RETURN_IF_ERROR(
        make(context, shaders::key_seal(), 4, 8, {kElementwise, element_code(element)}, ops->key_seal_[element]));
  }
  return ops;  // matvec_ and get_rows_ fill on first use of each weight type
}

Expected<ComputePipeline*> GpuOps::weight_pipeline(std::map<DType, std::unique_ptr<ComputePipeline>>& cache, DType type,
                                                   std::span<const uint32_t> spirv, uint32_t workgroup,
                                                   uint32_t push_words, std::string_view op, uint32_t bindings,
                                                   std::initializer_list<uint32_t> more_constants) {
  const uint32_t id = static_cast<uint32_t>(type);
  if (!gpu_reads_weights(type)) {
    const std::string_view name = ggml_type_name(id);
    return Status::unimplemented(
        fmt::format("the GPU {} does not read {} weights (ggml type {})", op, name.empty() ? "unknown" : name, id));
  }
  std::unique_ptr<ComputePipeline>& pipeline = cache[type];
  if (!pipeline) {
    std::vector<uint32_t> constants{workgroup, id};
    constants.insert(constants.end(), more_constants.begin(), more_constants.end());
    auto made = ComputePipeline::create(context_, spirv, bindings, push_words * sizeof(uint32_t), constants);
    if (!made) return made.status();
    pipeline = std::move(*made);
  }
  return pipeline.get();
}

Status GpuOps::dispatch(const char* kind, ComputePipeline& pipeline, std::span<GpuBuffer* const> buffers,
                        const void* push, uint32_t groups_x, uint32_t groups_y) {
  if (recorder_->recording()) return recorder_->dispatch(pipeline, buffers, push, groups_x, groups_y, kind);
  KVS_RETURN_IF_ERROR(recorder_->begin());
  const Status recorded = recorder_->dispatch(pipeline, buffers, push, groups_x, groups_y, kind);
  const Status submitted = recorder_->submit();
  return recorded ? submitted : recorded;
}

Status GpuOps::rope(GpuBuffer& x, GpuBuffer& cos, GpuBuffer& sin, uint32_t tokens, uint32_t heads, uint32_t head_dim,
                    uint32_t half, bool neox, uint32_t offset) {
  if (offset + 2 * half > head_dim || x.bytes() < size_t{tokens} * heads * head_dim * sizeof(float) ||
      cos.bytes() < size_t{tokens} * half * sizeof(float) || sin.bytes() < cos.bytes()) {
    return Status::invalid_argument(
        fmt::format("RoPE of {} pairs at {} over {} tokens of {} heads of {}: buffers of {}, {}", half, offset, tokens,
                    heads, head_dim, x.bytes(), cos.bytes()));
  }
  GpuBuffer* const buffers[] = {&x, &cos, &sin};
  const uint32_t push[] = {tokens, heads, head_dim, half, offset};
  return dispatch("rope", neox ? *rope_neox_ : *rope_, buffers, push, groups_for(size_t{tokens} * heads * half));
}

Status GpuOps::gated(const char* kind, ComputePipeline& pipeline, GpuBuffer& gate, GpuBuffer& up, uint32_t n) {
  if (gate.bytes() < n * sizeof(float) || up.bytes() < n * sizeof(float)) {
    return Status::invalid_argument(
        fmt::format("{} of {} values over {} and {} bytes", kind, n, gate.bytes(), up.bytes()));
  }
  GpuBuffer* const buffers[] = {&gate, &up};
  return dispatch(kind, pipeline, buffers, &n, groups_for(n));
}

Status GpuOps::swiglu(GpuBuffer& gate, GpuBuffer& up, uint32_t n) { return gated("swiglu", *swiglu_, gate, up, n); }

Status GpuOps::geglu(GpuBuffer& gate, GpuBuffer& up, uint32_t n) { return gated("geglu", *geglu_, gate, up, n); }

Status GpuOps::scale(GpuBuffer& x, uint32_t n, float factor) {
  if (x.bytes() < n * sizeof(float)) {
    return Status::invalid_argument(fmt::format("scale of {} values over {} bytes", n, x.bytes()));
  }
  GpuBuffer* const buffers[] = {&x};
  struct {
    uint32_t n;
    float factor;
  } push{n, factor};
  return dispatch("scale", *scale_, buffers, &push, groups_for(n));
}

Status GpuOps::add(GpuBuffer& x, GpuBuffer& y, uint32_t n, uint32_t period) {
  if (n == 0) return Status::ok();
  if (period == 0) period = n;
  if (x.bytes() < n * sizeof(float) || y.bytes() < std::min(n, period) * sizeof(float) || n % period != 0) {
    return Status::invalid_argument(
        fmt::format("add of {} values (period {}) over {} and {} bytes", n, period, x.bytes(), y.bytes()));
  }
  GpuBuffer* const buffers[] = {&x, &y};
  const uint32_t push[] = {n, period};
  return dispatch("add", *add_, buffers, push, groups_for(n));
}

Status GpuOps::get_rows(DType type, GpuBuffer& table, GpuBuffer& ids, GpuBuffer& out, uint32_t tokens, uint32_t cols,
                        uint32_t first_row, uint32_t rows) {
  auto pipeline = weight_pipeline(get_rows_, type, shaders::get_rows(), kElementwise, 4, "get_rows", 3, {});
  if (!pipeline) return pipeline.status();
  KVS_RETURN_IF_ERROR(check_whole_blocks(type, cols));
  if (ids.bytes() < tokens * sizeof(uint32_t) || out.bytes() < size_t{tokens} * cols * sizeof(float)) {
    return Status::invalid_argument(
        fmt::format("{} rows of {} {} values into {} bytes", tokens, cols, dtype_name(type), out.bytes()));
  }
  GpuBuffer* const buffers[] = {&table, &ids, &out};
  const uint32_t push[] = {tokens, cols, first_row, rows};
  return dispatch("get_rows", **pipeline, buffers, push, groups_for(size_t{tokens} * cols));
}

Status GpuOps::rmsnorm(GpuBuffer& x, GpuBuffer& w, GpuBuffer& y, uint32_t rows, uint32_t cols, float eps,
                       uint32_t stride) {
  const size_t span = rows == 0 ? 0 : (size_t{rows} - 1) * (stride == 0 ? cols : stride) + cols;
  if ((stride != 0 && stride < cols) || x.bytes() < span * sizeof(float) || w.bytes() < cols * sizeof(float) ||
      y.bytes() < span * sizeof(float)) {
    return Status::invalid_argument(fmt::format("rmsnorm of {} x {} (stride {}) over buffers of {}, {} and {} bytes",
                                                rows, cols, stride, x.bytes(), w.bytes(), y.bytes()));
  }
  GpuBuffer* const buffers[] = {&x, &w, &y};
  struct {
    uint32_t cols;
    float eps;
    uint32_t stride;
  } push{cols, eps, stride};
  return dispatch("rmsnorm", *rmsnorm_, buffers, &push, rows);
}

Status GpuOps::matvec(DType type, GpuBuffer& w, GpuBuffer& x, GpuBuffer& y, uint32_t rows, uint32_t cols,
                      uint32_t tokens, uint32_t out_rows, uint32_t row_offset, uint32_t x_stride, uint32_t x_offset) {
  if (out_rows == 0) out_rows = rows;
  if (x_stride == 0) x_stride = cols;
  auto pipeline = weight_pipeline(matvec_, type, shaders::matvec(), kMatvecWorkgroup, 11, "matvec", 4, {0});
  if (!pipeline) return pipeline.status();
  KVS_RETURN_IF_ERROR(check_whole_blocks(type, cols));
  const size_t x_span = tokens == 0 ? 0 : (size_t{tokens} - 1) * x_stride + x_offset + cols;
  if (w.bytes() < rows * dtype_row_bytes(type, cols) || x.bytes() < x_span * sizeof(float) ||
      y.bytes() < size_t{tokens} * out_rows * sizeof(float) || size_t{row_offset} + rows > out_rows) {
    return Status::invalid_argument(
        fmt::format("matvec of {} x {} {} over {} tokens into rows {}.. of {}: buffers of {}, {} and {} bytes", rows,
                    cols, dtype_name(type), tokens, row_offset, out_rows, w.bytes(), x.bytes(), y.bytes()));
  }
  GpuBuffer* const buffers[] = {&w, &x, &y, &x};  // binding 3 (experts' ids) unread
  const uint32_t rows_per_group = std::max<uint32_t>(1, kMatvecWorkgroup / context_.info().subgroup_size);
  const uint32_t push[] = {rows, cols, tokens, rows_per_group, out_rows, row_offset, x_stride, x_offset, 1, 0, 0};
  return dispatch("matvec", **pipeline, buffers, push, (rows + rows_per_group - 1) / rows_per_group, tokens);
}

Status GpuOps::expert_matvec(DType type, GpuBuffer& w, GpuBuffer& x, GpuBuffer& y, GpuBuffer& ids,
                             const ExpertProduct& p) {
  auto pipeline =
      weight_pipeline(expert_matvec_, type, shaders::matvec(), kMatvecWorkgroup, 11, "expert matvec", 4, {1});
  if (!pipeline) return pipeline.status();
  KVS_RETURN_IF_ERROR(check_whole_blocks(type, p.cols));
  if (p.x_group == 0 || w.bytes() < size_t{p.experts} * p.rows * dtype_row_bytes(type, p.cols) ||
      x.bytes() < size_t{(p.slots + p.x_group - 1) / p.x_group} * p.cols * sizeof(float) ||
      y.bytes() < size_t{p.slots} * p.rows * sizeof(float) || ids.bytes() < p.slots * sizeof(uint32_t)) {
    return Status::invalid_argument(
        fmt::format("expert matvec of {} experts of {} x {} {} over {} rows: buffers of {}, {} and {} bytes", p.experts,
                    p.rows, p.cols, dtype_name(type), p.slots, w.bytes(), x.bytes(), y.bytes()));
  }
  GpuBuffer* const buffers[] = {&w, &x, &y, &ids};
  const uint32_t rows_per_group = std::max<uint32_t>(1, kMatvecWorkgroup / context_.info().subgroup_size);
  const uint32_t push[] = {p.rows, p.cols, p.slots,   rows_per_group, p.rows,   0,
                           p.cols, 0,      p.x_group, p.first_expert, p.experts};
  return dispatch("expert_matvec", **pipeline, buffers, push, (p.rows + rows_per_group - 1) / rows_per_group, p.slots);
}

Status GpuOps::copy_rows(GpuBuffer& src, Strided from, GpuBuffer& dst, Strided to, uint32_t tokens, uint32_t heads,
                         uint32_t width) {
  const auto span = [&](Strided s) {
    return tokens == 0 || heads == 0
               ? 0
               : (size_t{tokens} - 1) * s.stride + (size_t{heads} - 1) * s.head_stride + s.offset + width;
  };
  if (src.bytes() < span(from) * sizeof(float) || dst.bytes() < span(to) * sizeof(float)) {
    return Status::invalid_argument(fmt::format("a copy of {} x {} rows of {}: buffers of {} and {} bytes", tokens,
                                                heads, width, src.bytes(), dst.bytes()));
  }
  GpuBuffer* const buffers[] = {&src, &dst};
  const uint32_t push[] = {tokens,      heads,     width,          from.stride, from.head_stride,
                           from.offset, to.stride, to.head_stride, to.offset};
  return dispatch("copy", *copy_, buffers, push, groups_for(size_t{tokens} * heads * width));
}

Status GpuOps::moe_route(GpuBuffer& logits, GpuBuffer& ids, GpuBuffer& weights, uint32_t tokens, const MoeConfig& moe) {
  constexpr size_t kMaxExperts = 256;  // moe_route.comp's
  const size_t k = moe.experts_used;
  if (moe.num_experts == 0 || moe.num_experts > kMaxExperts || k == 0 || k > moe.num_experts ||
      logits.bytes() < size_t{tokens} * moe.num_experts * sizeof(float) || ids.bytes() < tokens * k * 4 ||
      weights.bytes() < tokens * k * 4) {
    return Status::invalid_argument(
        fmt::format("routing {} tokens to {} of {} experts (at most {})", tokens, k, moe.num_experts, kMaxExperts));
  }
  GpuBuffer* const buffers[] = {&logits, &ids, &weights};
  struct {
    uint32_t tokens, experts, k, softmax, normalize;
    float scale;
  } push{tokens,
         static_cast<uint32_t>(moe.num_experts),
         static_cast<uint32_t>(k),
         moe.gating == ExpertGating::kSoftmax ? 1u : 0u,
         moe.normalize_weights ? 1u : 0u,
         moe.weights_scale};
  return dispatch("moe_route", *moe_route_, buffers, &push, (tokens + kRouteWorkgroup - 1) / kRouteWorkgroup);
}

Status GpuOps::moe_combine(GpuBuffer& out, GpuBuffer& y, GpuBuffer& ids, GpuBuffer& weights, uint32_t tokens,
                           uint32_t dim, const MoeConfig& moe) {
  const size_t k = moe.experts_used;
  if (out.bytes() < size_t{tokens} * dim * 4 || y.bytes() < size_t{tokens} * k * dim * 4 ||
      ids.bytes() < tokens * k * 4 || weights.bytes() < tokens * k * 4) {
    return Status::invalid_argument(fmt::format("combining {} tokens' {} experts of {}", tokens, k, dim));
  }
  GpuBuffer* const buffers[] = {&out, &y, &ids, &weights};
  const uint32_t push[] = {tokens, dim, static_cast<uint32_t>(k), moe.shared_experts > 0 ? 1u : 0u};
  return dispatch("moe_combine", *moe_combine_, buffers, push, groups_for(size_t{tokens} * dim));
}

}  // namespace kvs
