#include "gpu/gpu_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "gpu/key_groups.h"
#include "gpu/shaders.h"

namespace kvs {

namespace {

// A pipeline, or the Status of why not, into `slot`.
Status make(VulkanContext& context, std::span<const uint32_t> spirv, uint32_t bindings, uint32_t push_words,
            std::initializer_list<uint32_t> constants, std::unique_ptr<ComputePipeline>& slot) {
  const std::vector<uint32_t> specialization(constants);
  auto pipeline = ComputePipeline::create(context, spirv, bindings, push_words * sizeof(uint32_t), specialization);
  if (!pipeline) return pipeline.status();
  slot = std::move(*pipeline);
  return Status::ok();
}

// The shaders' code for a K/V element: 0 f32, 1 f16, 2 bf16, 3 int8, 4 int4.
uint32_t element_code(KvDType element) {
  switch (element) {
    case KvDType::kF32: return 0;
    case KvDType::kF16: return 1;
    case KvDType::kBF16: return 2;
    case KvDType::kInt8: return 3;
    case KvDType::kInt4: return 4;
  }
  return 0;
}

// The most rows a per-channel key group has (kv/kv_format.cpp's; key_seal.comp keeps a group's nibbles).
constexpr size_t kMaxChannelGroupRows = 16;

// What the KV shaders do not read yet, by name; ok for the rest.
Status check_kv_format(const KvTensorFormat& f) {
  if (f.scale_axis == KvScaleAxis::kPerChannel && (f.group_size > kMaxChannelGroupRows || f.width % 2 != 0)) {
    return Status::invalid_argument(
        fmt::format("{} keys per channel in groups of {} rows of {}: the GPU seals groups "
                    "of at most {} rows of an even width",
                    kv_dtype_name(f.element), f.group_size, f.width, kMaxChannelGroupRows));
  }
  if (f.rotated && !std::has_single_bit(f.width)) {
    return Status::invalid_argument(
        fmt::format("rotated keys of width {}: a Hadamard transform's order is a power of two", f.width));
  }
  if (kv_dtype_quantized(f.element) && f.scale_axis == KvScaleAxis::kPerToken &&
      (f.group_size == 0 || f.width % f.group_size != 0)) {
    return Status::invalid_argument(
        fmt::format("{} rows of {} in groups of {}", kv_dtype_name(f.element), f.width, f.group_size));
  }
  return Status::ok();
}

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

}  // namespace kvs

namespace kvs {

Status GpuOps::hadamard(GpuBuffer& x, uint32_t rows, uint32_t width) {
  if (!std::has_single_bit(width) || x.bytes() < size_t{rows} * width * sizeof(float)) {
    return Status::invalid_argument(
        fmt::format("a Hadamard transform of {} rows of {} (a power of two) in {} bytes", rows, width, x.bytes()));
  }
  GpuBuffer* const buffers[] = {&x};
  struct {
    uint32_t rows, width;
    float norm;
  } push{rows, width, 1.0f / std::sqrt(static_cast<float>(width))};  // hadamard_transform's fp32 norm
  return dispatch("hadamard", *hadamard_, buffers, &push, groups_for(rows));
}

Status GpuOps::kv_write(const KvTensorFormat& format, GpuBuffer& rows, GpuBuffer& pool, GpuBuffer& slots,
                        uint32_t tokens, uint32_t kv_heads, const KeyTails* tails) {
  KVS_RETURN_IF_ERROR(check_kv_format(format));
  const uint32_t width = static_cast<uint32_t>(format.width), block_size = static_cast<uint32_t>(format.rows);
  if (rows.bytes() < size_t{tokens} * kv_heads * width * sizeof(float) || slots.bytes() < tokens * sizeof(uint32_t) ||
      block_size == 0) {
    return Status::invalid_argument(fmt::format("KV write of {} tokens of {} x {}: buffers of {} and {} bytes", tokens,
                                                kv_heads, width, rows.bytes(), slots.bytes()));
  }
  if (format.scale_axis == KvScaleAxis::kPerChannel)
    return write_key_groups(format, rows, pool, slots, tokens, kv_heads, tails);
  GpuBuffer* const buffers[] = {&rows, &pool, &slots};
  const bool quantized = kv_dtype_quantized(format.element);
  const uint32_t push[] = {tokens,
                           kv_heads,
                           width,
                           block_size,
                           static_cast<uint32_t>(format.group_size),
                           static_cast<uint32_t>(format.head_block_bytes()),
                           static_cast<uint32_t>(format.data_bytes())};
  // One invocation a value, or a quantized group.
  const size_t invocations = size_t{tokens} * kv_heads * (quantized ? width / format.group_size : width);
  return dispatch("kv_write", *kv_write_.at(format.element), buffers, push, groups_for(invocations));
}

Status GpuOps::write_key_groups(const KvTensorFormat& format, GpuBuffer& rows, GpuBuffer& pool, GpuBuffer& slots,
                                uint32_t tokens, uint32_t kv_heads, const KeyTails* tails) {
  if (tails == nullptr || tails->tails == nullptr || tails->tail_of_token == nullptr || tails->seals == nullptr ||
      tails->tail_of_token->bytes() < tokens * sizeof(uint32_t) ||
      tails->seals->bytes() < size_t{tails->num_seals} * KeyGroupPlan::kSealWords * sizeof(uint32_t)) {
    return Status::invalid_argument(
        fmt::format("a write of {} keys per channel needs their key tails, the tail of "
                    "each of {} tokens and {} seals",
                    kv_dtype_name(format.element), tokens, tails ? tails->num_seals : 0));
  }
  const uint32_t width = static_cast<uint32_t>(format.width), group = static_cast<uint32_t>(format.group_size);
  // The groups the step completes first: they read the rows earlier steps left in the tails, which the rows staged
  // next may overwrite (a block whose group completes and whose next group begins to fill in the same step).
  if (tails->num_seals > 0) {
    GpuBuffer* const sealed[] = {&rows, &pool, tails->tails, tails->seals};
    const uint32_t seal_push[] = {tails->num_seals,
                                  kv_heads,
                                  width,
                                  group,
                                  static_cast<uint32_t>(format.head_block_bytes()),
                                  static_cast<uint32_t>(format.data_bytes()),
                                  tails->layer,
                                  tails->num_layers};
    const size_t columns = format.element == KvDType::kInt8 ? width : width / 2;
    KVS_RETURN_IF_ERROR(dispatch("key_seal", *key_seal_.at(format.element), sealed, seal_push,
                                 groups_for(size_t{tails->num_seals} * kv_heads * columns)));
  }
  GpuBuffer* const staged[] = {&rows, tails->tails, &slots, tails->tail_of_token};
  const uint32_t stage_push[] = {tokens,       kv_heads,         width, static_cast<uint32_t>(format.rows), group,
                                 tails->layer, tails->num_layers};
  return dispatch("key_tail_write", *key_tail_write_, staged, stage_push,
                  groups_for(size_t{tokens} * kv_heads * width));
}

Status GpuOps::paged_attention(const KvTensorFormat& key, const KvTensorFormat& value, GpuBuffer& q, GpuBuffer& keys,
                               GpuBuffer& values, GpuBuffer& tables, GpuBuffer& token_info, GpuBuffer& scratch,
                               GpuBuffer& out, uint32_t tokens, const AttentionShape& shape, const KeyTails* tails) {
  for (const KvTensorFormat* f : {&key, &value}) KVS_RETURN_IF_ERROR(check_kv_format(*f));
  const bool per_channel = key.scale_axis == KvScaleAxis::kPerChannel;
  if (per_channel && (tails == nullptr || tails->tails == nullptr || tails->sequence_tails == nullptr)) {
    return Status::invalid_argument(
        fmt::format("attention over {} keys per channel needs their key tails", kv_dtype_name(key.element)));
  }
  if (shape.kv_heads == 0 || shape.heads % shape.kv_heads != 0 || shape.block_size == 0 ||
      scratch.bytes() < (size_t{shape.first_token} + tokens) * shape.heads * shape.max_slots * sizeof(float) ||
      out.bytes() < (size_t{shape.first_token} + tokens) * shape.heads * shape.value_width * sizeof(float) ||
      token_info.bytes() < (size_t{shape.first_token} + tokens) * 4 * sizeof(uint32_t)) {
    return Status::invalid_argument(fmt::format(
        "paged attention of {} tokens, {} heads over {} KV heads, {} slots a token: scratch {} and out {} bytes",
        tokens, shape.heads, shape.kv_heads, shape.max_slots, scratch.bytes(), out.bytes()));
  }
  std::unique_ptr<ComputePipeline>& pipeline = attention_[{key.element, value.element, per_channel}];
  if (!pipeline) {
    KVS_RETURN_IF_ERROR(
        make(context_, shaders::paged_attention(), 9, 19,
             {kAttentionWorkgroup, element_code(key.element), element_code(value.element), per_channel ? 1u : 0u},
             pipeline));
  }
  // Without tails, bindings 7 and 8 name a buffer the shader never reads.
  GpuBuffer* const buffers[] = {&q,
                                &keys,
                                &values,
                                &tables,
                                &token_info,
                                &scratch,
                                &out,
                                per_channel ? tails->sequence_tails : &tables,
                                per_channel ? tails->tails : &tables};
  struct {
    uint32_t heads, kv_heads, head_dim, value_width, block_size, max_blocks, max_slots;
    float scale;
    uint32_t k_group, k_head_block_bytes, k_data_bytes, v_group, v_head_block_bytes, v_data_bytes;
    uint32_t layer, num_layers, window, value_row_width, first_token;
  } push{shape.heads,
         shape.kv_heads,
         shape.head_dim,
         shape.value_width,
         shape.block_size,
         shape.max_blocks,
         shape.max_slots,
         shape.scale,
         static_cast<uint32_t>(key.group_size),
         static_cast<uint32_t>(key.head_block_bytes()),
         static_cast<uint32_t>(key.data_bytes()),
         static_cast<uint32_t>(value.group_size),
         static_cast<uint32_t>(value.head_block_bytes()),
         static_cast<uint32_t>(value.data_bytes()),
         per_channel ? tails->layer : 0u,
         per_channel ? tails->num_layers : 1u,
         shape.window,
         shape.value_row_width == 0 ? shape.value_width : shape.value_row_width,
         shape.first_token};
  return dispatch("paged_attention", *pipeline, buffers, &push, shape.heads, tokens);
}

Status GpuOps::slot_mass(GpuBuffer& scratch, GpuBuffer& token_info, GpuBuffer& sequences, GpuBuffer& token_list,
                         GpuBuffer& mass, uint32_t num_sequences, uint32_t max_slots, const AttentionShape& shape,
                         uint32_t layer) {
  if (num_sequences == 0 || max_slots == 0) return Status::ok();
  // Fixed point of 2^24 a unit in 32 bits a token: a group's mass (one probability a query head) stays below 256.
  if (shape.kv_heads == 0 || shape.heads % shape.kv_heads != 0 || shape.heads / shape.kv_heads > 255 ||
      sequences.bytes() < size_t{num_sequences} * 4 * sizeof(uint32_t)) {
    return Status::invalid_argument(fmt::format("slot mass of {} sequences, {} heads over {} KV heads", num_sequences,
                                                shape.heads, shape.kv_heads));
  }
  GpuBuffer* const buffers[] = {&scratch, &token_info, &sequences, &token_list, &mass};
  const uint32_t push[] = {shape.heads, shape.kv_heads, shape.max_slots, shape.window, layer};
  return dispatch("slot_mass", *slot_mass_, buffers, push, (max_slots + kSlotMassWorkgroup - 1) / kSlotMassWorkgroup,
                  num_sequences * shape.kv_heads);
}

Status GpuOps::shift_keys(const KvTensorFormat& format, GpuBuffer& keys, const KeyShift& shift) {
  if (shift.num_moves == 0) return Status::ok();
  KVS_RETURN_IF_ERROR(check_kv_format(format));
  constexpr uint32_t kMaxWidth = 512;  // key_shift.comp's row
  if (format.scale_axis == KvScaleAxis::kPerChannel || format.width > kMaxWidth || 2 * shift.half > format.width ||
      shift.staged == nullptr || shift.moves == nullptr || shift.angles == nullptr ||
      shift.staged->bytes() < (size_t{shift.first_move} + shift.num_moves) * shift.staged_stride) {
    return Status::invalid_argument(fmt::format("re-rotating {} moved {} keys of width {} (keys per {}; at most {})",
                                                shift.num_moves, kv_dtype_name(format.element), format.width,
                                                kv_scale_axis_name(format.scale_axis), kMaxWidth));
  }
  std::unique_ptr<ComputePipeline>& pipeline = key_shift_[{format.element, shift.neox, format.rotated}];
  if (!pipeline) {
    KVS_RETURN_IF_ERROR(make(
        context_, shaders::key_shift(), 4, 12,
        {kShiftWorkgroup, element_code(format.element), shift.neox ? 1u : 0u, format.rotated ? 1u : 0u}, pipeline));
  }
  GpuBuffer* const buffers[] = {shift.staged, &keys, shift.moves, shift.angles};
  struct {
    uint32_t moves, width, half, kv_heads, block_size, group_size, head_block_bytes, data_bytes, staged_stride,
        pair_offset, first_move;
    float norm;
  } push{shift.num_moves,
         static_cast<uint32_t>(format.width),
         shift.half,
         shift.kv_heads,
         static_cast<uint32_t>(format.rows),
         static_cast<uint32_t>(format.group_size),
         static_cast<uint32_t>(format.head_block_bytes()),
         static_cast<uint32_t>(format.data_bytes()),
         shift.staged_stride,
         shift.pair_offset,
         shift.first_move,
         1.0f / std::sqrt(static_cast<float>(format.width))};
  return dispatch("key_shift", *pipeline, buffers, &push, (shift.num_moves + kShiftWorkgroup - 1) / kShiftWorkgroup);
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

Status GpuOps::kv_read(const KvTensorFormat& format, uint32_t kv_heads, uint32_t head, GpuBuffer& pool,
                       GpuBuffer& tables, uint32_t table_offset, uint32_t slots, GpuBuffer& out) {
  KVS_RETURN_IF_ERROR(check_kv_format(format));
  if (format.scale_axis == KvScaleAxis::kPerChannel || head >= kv_heads || format.rows == 0 ||
      out.bytes() < size_t{slots} * format.width * sizeof(float) ||
      tables.bytes() < (size_t{table_offset} + (slots + format.rows - 1) / format.rows) * sizeof(uint32_t)) {
    return Status::invalid_argument(fmt::format("reading {} rows of {} {} (keys per {}) back", slots, format.width,
                                                kv_dtype_name(format.element), kv_scale_axis_name(format.scale_axis)));
  }
  if (slots == 0) return Status::ok();
  GpuBuffer* const buffers[] = {&pool, &tables, &out};
  const uint32_t push[] = {slots,
                           static_cast<uint32_t>(format.width),
                           static_cast<uint32_t>(format.rows),
                           kv_heads,
                           head,
                           static_cast<uint32_t>(format.group_size),
                           static_cast<uint32_t>(format.head_block_bytes()),
                           static_cast<uint32_t>(format.data_bytes()),
                           table_offset};
  return dispatch("kv_read", *kv_read_[format.element], buffers, push, groups_for(size_t{slots} * format.width));
}

}  // namespace kvs
