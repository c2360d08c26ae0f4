// Metadata values and tensor sizes: the parts of gguf.h shared by the reader and the writer.
#include <limits>
#include <type_traits>

#include "gguf/gguf.h"

namespace kvs::gguf {

// Value::of relies on the variant's alternatives being listed in GGUF type-id order.
static_assert(std::is_same_v<std::variant_alternative_t<0, Value::Data>, uint8_t>);
static_assert(std::is_same_v<std::variant_alternative_t<8, Value::Data>, std::string>);
static_assert(std::is_same_v<std::variant_alternative_t<9, Value::Data>, Array>);
static_assert(std::is_same_v<std::variant_alternative_t<12, Value::Data>, double>);

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "unknown";
}

std::optional<int64_t> Value::as_int() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      data);
}

std::optional<double> Value::as_float() const {
  if (const auto* f = std::get_if<float>(&data)) return *f;
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (auto i = as_int()) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&data); }

const Array* Value::as_array() const { return std::get_if<Array>(&data); }

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;  // the reader has checked that this cannot overflow
  return n;
}

Expected<uint64_t> tensor_data_bytes(DType type, std::span<const uint64_t> dims) {
  if (dims.empty() || dims.size() > kMaxDims) {
    return Status::invalid_argument(
        fmt::format("tensor has {} dimensions; GGUF allows 1 to {}", dims.size(), kMaxDims));
  }
  const uint64_t block = dtype_block_elements(type);
  uint64_t elements = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return Status::invalid_argument(fmt::format("dimension {} is zero", i));
    if (__builtin_mul_overflow(elements, dims[i], &elements)) {
      return Status::invalid_argument(fmt::format("element count overflows 64 bits at dimension {} ({})", i, dims[i]));
    }
  }
  if (dims[0] % block != 0) {
    return Status::invalid_argument(
        fmt::format("row length {} is not a multiple of the {} block size {}", dims[0], dtype_name(type), block));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / block, static_cast<uint64_t>(dtype_block_bytes(type)), &bytes) ||
      bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::invalid_argument(fmt::format("byte size of {} {} elements overflows", elements, dtype_name(type)));
  }
  return bytes;
}

}  // namespace kvs::gguf
