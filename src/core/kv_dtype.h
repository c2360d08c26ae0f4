// The element types a KV cache can store: the one enum for K, V and MLA latents, read by the sizing,
// the storage, the write path and the attention kernels (tensor weights have their own, core/dtype.h).
// Floating types store one value an element; quantized types store integers that a scale of their
// group turns into values (kv/kv_format.h says where the scales live).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvs {

enum class KvDType { kF32, kF16, kBF16, kInt8, kInt4 };

std::optional<KvDType> kv_dtype_from_name(std::string_view name);  // "f32" "fp16"/"f16" "bf16" "int8" "int4"
std::string_view kv_dtype_name(KvDType type);

// Bits of one element, scales not counted: 32, 16, 16, 8, 4.
size_t kv_dtype_bits(KvDType type);
// True for int8 and int4, whose groups carry a scale.
bool kv_dtype_quantized(KvDType type);

// The element types of a cache's K and V, each its own (an MLA latent uses k). One type converts to
// both, as `--kv-dtype` sets both.
struct KvDTypes {
  KvDType k = KvDType::kF32;
  KvDType v = KvDType::kF32;

  constexpr KvDTypes() = default;
  constexpr KvDTypes(KvDType both) : k(both), v(both) {}  // NOLINT(google-explicit-constructor)
  constexpr KvDTypes(KvDType k_type, KvDType v_type) : k(k_type), v(v_type) {}
  bool operator==(const KvDTypes&) const = default;
};
// "f16" when K and V agree, else "k int8 / v int4".
std::string kv_dtypes_name(KvDTypes types);

// Which elements of a quantized K or V share a scale and minimum (x = min + scale * q).
enum class KvScaleAxis {
  kNone,        // floating elements carry their own exponent
  kPerChannel,  // one pair per channel for each group of rows: groups run along tokens (K, as in KIVI)
  kPerToken,    // one pair per row for each group of channels: groups run along the row (V; K optionally)
};
std::optional<KvScaleAxis> kv_scale_axis_from_name(std::string_view name);  // "channel" / "token"
std::string_view kv_scale_axis_name(KvScaleAxis axis);

}  // namespace kvs
