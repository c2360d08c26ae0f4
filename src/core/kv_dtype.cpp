#include "core/kv_dtype.h"

namespace kvs {

std::optional<KvDType> kv_dtype_from_name(std::string_view n) {
  if (n == "f32" || n == "fp32") return KvDType::kF32;
  if (n == "f16" || n == "fp16") return KvDType::kF16;
  if (n == "bf16") return KvDType::kBF16;
  if (n == "int8" || n == "q8") return KvDType::kInt8;
  if (n == "int4" || n == "q4") return KvDType::kInt4;
  return std::nullopt;
}

std::string_view kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::kF32: return "f32";
    case KvDType::kF16: return "f16";
    case KvDType::kBF16: return "bf16";
    case KvDType::kInt8: return "int8";
    case KvDType::kInt4: return "int4";
  }
  return "unknown";
}

size_t kv_dtype_bits(KvDType t) {
  switch (t) {
    case KvDType::kF32: return 32;
    case KvDType::kF16:
    case KvDType::kBF16: return 16;
    case KvDType::kInt8: return 8;
    case KvDType::kInt4: return 4;
  }
  return 0;
}

bool kv_dtype_quantized(KvDType t) { return t == KvDType::kInt8 || t == KvDType::kInt4; }

std::string kv_dtypes_name(KvDTypes t) {
  if (t.k == t.v) return std::string(kv_dtype_name(t.k));
  std::string name = "k ";
  name.append(kv_dtype_name(t.k)).append(" / v ").append(kv_dtype_name(t.v));
  return name;
}

std::optional<KvScaleAxis> kv_scale_axis_from_name(std::string_view name) {
  if (name == "channel") return KvScaleAxis::kPerChannel;
  if (name == "token") return KvScaleAxis::kPerToken;
  return std::nullopt;
}

std::string_view kv_scale_axis_name(KvScaleAxis axis) {
  switch (axis) {
    case KvScaleAxis::kNone: return "none";
    case KvScaleAxis::kPerChannel: return "channel";
    case KvScaleAxis::kPerToken: return "token";
  }
  return "unknown";
}

}  // namespace kvs
