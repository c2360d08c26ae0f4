// Element types of tensors, with the numeric ids GGUF files use (ggml_type), so files written
// by other tools load. Quantized types come in blocks of `block_elements` values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvs {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kBF16 = 30,
};

// Q8_0: 32 values = fp16 scale d + 32 x int8 q; value = d * q.
struct BlockQ8_0 {
  static constexpr size_t kElements = 32;
  uint16_t d;  // fp16
  int8_t qs[kElements];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: 32 values = fp16 scale d + 16 bytes of nibbles; value j (j < 16) is the low nibble of
// qs[j], value j + 16 its high nibble; value = d * (nibble - 8).
struct BlockQ4_0 {
  static constexpr size_t kElements = 32;
  uint16_t d;  // fp16
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

std::optional<DType> dtype_from_ggml_id(uint32_t id);
std::optional<DType> dtype_from_name(std::string_view name);  // "f32", "f16", "bf16", "q8_0", "q4_0"
std::string_view dtype_name(DType type);

size_t dtype_block_elements(DType type);  // 1 for plain types, 32 for Q8_0/Q4_0
size_t dtype_block_bytes(DType type);     // bytes of one block
// Bytes of a row of `elements` values; `elements` must be a multiple of the block size.
size_t dtype_row_bytes(DType type, size_t elements);

}  // namespace kvs
