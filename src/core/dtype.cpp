#include "core/dtype.h"

#include "core/status.h"

namespace kvs {

std::optional<DType> dtype_from_ggml_id(uint32_t id) {
  switch (id) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 2: return DType::kQ4_0;
    case 8: return DType::kQ8_0;
    case 30: return DType::kBF16;
    default: return std::nullopt;
  }
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  if (name == "q8_0") return DType::kQ8_0;
  if (name == "q4_0") return DType::kQ4_0;
  return std::nullopt;
}

std::string_view dtype_name(DType type) {
  switch (type) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
  }
  return "unknown";
}

size_t dtype_block_elements(DType type) {
  switch (type) {
    case DType::kQ8_0: return BlockQ8_0::kElements;
    case DType::kQ4_0: return BlockQ4_0::kElements;
    default: return 1;
  }
}

size_t dtype_block_bytes(DType type) {
  switch (type) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
  }
  return 0;
}

size_t dtype_row_bytes(DType type, size_t elements) {
  const size_t block = dtype_block_elements(type);
  KVS_ASSERT(elements % block == 0, "row of {} elements is not a multiple of the {} block of {}", elements,
             dtype_name(type), block);
  return elements / block * dtype_block_bytes(type);
}

}  // namespace kvs
