// GpuOps' operations on the KV cache (gpu_ops.h): the Hadamard transform of rotated keys, the KV write (keys per
// channel through their tails), paged attention, H2O's slot mass, a compaction's key shift, and rows read back.
#include <algorithm>
#include <cmath>

#include "gpu/gpu_ops.h"
#include "gpu/gpu_ops_internal.h"
#include "gpu/key_groups.h"
#include "gpu/shaders.h"

namespace kvs {

using gpu_ops_internal::check_kv_format;
using gpu_ops_internal::element_code;
using gpu_ops_internal::make;

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
