// What gpu_ops.cpp and gpu_kv_ops.cpp share: building a pipeline, the K/V element codes of the shaders, and what the
// KV shaders read.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "core/kv_dtype.h"
#include "core/status.h"
#include "gpu/compute_pipeline.h"
#include "kv/kv_format.h"

namespace kvs::gpu_ops_internal {

// A pipeline, or the Status of why not, into `slot`.
inline Status make(VulkanContext& context, std::span<const uint32_t> spirv, uint32_t bindings, uint32_t push_words,
                   std::initializer_list<uint32_t> constants, std::unique_ptr<ComputePipeline>& slot) {
  const std::vector<uint32_t> specialization(constants);
  auto pipeline = ComputePipeline::create(context, spirv, bindings, push_words * sizeof(uint32_t), specialization);
  if (!pipeline) return pipeline.status();
  slot = std::move(*pipeline);
  return Status::ok();
}

// The shaders' code for a K/V element: 0 f32, 1 f16, 2 bf16, 3 int8, 4 int4.
inline uint32_t element_code(KvDType element) {
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
inline constexpr size_t kMaxChannelGroupRows = 16;

// What the KV shaders do not read yet, by name; ok for the rest.
inline Status check_kv_format(const KvTensorFormat& f) {
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

}  // namespace kvs::gpu_ops_internal
