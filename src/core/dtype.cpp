#include "core/dtype.h"

#include <cctype>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>

#include "core/status.h"

namespace kvs {

std::optional<DType> dtype_from_ggml_id(uint32_t id) {
  switch (id) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 2: return DType::kQ4_0;
    case 3: return DType::kQ4_1;
    case 6: return DType::kQ5_0;
    case 7: return DType::kQ5_1;
    case 8: return DType::kQ8_0;
    case 10: return DType::kQ2_K;
    case 11: return DType::kQ3_K;
    case 12: return DType::kQ4_K;
    case 13: return DType::kQ5_K;
    case 14: return DType::kQ6_K;
    case 20: return DType::kIQ4_NL;
    case 23: return DType::kIQ4_XS;
    case 30: return DType::kBF16;
    default: return std::nullopt;
  }
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (DType t :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
        DType::kIQ4_NL, DType::kIQ4_XS, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    if (lower == dtype_name(t)) return t;
  }
  return std::nullopt;
}

std::string_view ggml_type_name(uint32_t id) {
  static constexpr std::string_view kNames[] = {
      "f32",     "f16",   "q4_0",   "q4_1",  "q4_2",     "q4_3",     "q5_0",     "q5_1",    "q8_0",
      "q8_1",    "q2_k",  "q3_k",   "q4_k",  "q5_k",     "q6_k",     "q8_k",     "iq2_xxs", "iq2_xs",
      "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s",    "iq4_xs",   "i8",       "i16",     "i32",
      "i64",     "f64",   "iq1_m",  "bf16",  "q4_0_4_4", "q4_0_4_8", "q4_0_8_8", "tq1_0",   "tq2_0"};
  return id < std::size(kNames) ? kNames[id] : std::string_view();
}

bool is_k_quant(DType type) {
  return type == DType::kQ2_K || type == DType::kQ3_K || type == DType::kQ4_K || type == DType::kQ5_K ||
         type == DType::kQ6_K;
}

bool is_block_quantized(DType type) {
  return type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ5_0 ||
         type == DType::kQ5_1 || type == DType::kIQ4_NL || type == DType::kIQ4_XS || is_k_quant(type);
}

std::string_view dtype_name(DType type) {
  switch (type) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kIQ4_XS: return "iq4_xs";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
  }
  return "unknown";
}

size_t dtype_block_elements(DType type) {
  switch (type) {
    case DType::kQ8_0: return BlockQ8_0::kElements;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL: return 32;
    case DType::kIQ4_XS:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return kSuperBlock;
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
    case DType::kQ4_1: return sizeof(BlockQ4_1);
    case DType::kQ5_0: return sizeof(BlockQ5_0);
    case DType::kQ5_1: return sizeof(BlockQ5_1);
    case DType::kIQ4_NL: return sizeof(BlockIQ4_NL);
    case DType::kIQ4_XS: return sizeof(BlockIQ4_XS);
    case DType::kQ2_K: return sizeof(BlockQ2_K);
    case DType::kQ3_K: return sizeof(BlockQ3_K);
    case DType::kQ4_K: return sizeof(BlockQ4_K);
    case DType::kQ5_K: return sizeof(BlockQ5_K);
    case DType::kQ6_K: return sizeof(BlockQ6_K);
  }
  return 0;
}

size_t dtype_row_bytes(DType type, size_t elements) {
  const size_t block = dtype_block_elements(type);
  KVS_ASSERT(elements % block == 0, "row of {} elements is not a multiple of the {} block of {}", elements,
             dtype_name(type), block);
  return elements / block * dtype_block_bytes(type);
}

namespace {

// Byte offsets of a block's fp16 scale fields: d, and dmin (or m) where the type has mins (-1: none).
struct ScaleOffsets {
  ptrdiff_t d = -1, dmin = -1;
  std::string_view min_name = "dmin";
};
ScaleOffsets scale_offsets(DType type) {
  switch (type) {
    case DType::kQ8_0: return {offsetof(BlockQ8_0, d)};
    case DType::kQ4_0: return {offsetof(BlockQ4_0, d)};
    case DType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m), "m"};
    case DType::kQ5_0: return {offsetof(BlockQ5_0, d)};
    case DType::kQ5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m), "m"};
    case DType::kIQ4_NL: return {offsetof(BlockIQ4_NL, d)};
    case DType::kIQ4_XS: return {offsetof(BlockIQ4_XS, d)};
    case DType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::kQ3_K: return {offsetof(BlockQ3_K, d)};
    case DType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::kQ6_K: return {offsetof(BlockQ6_K, d)};
    default: return {};
  }
}

}  // namespace

std::optional<NonFiniteBlockScale> find_non_finite_block_scale(DType type, std::span<const std::byte> data) {
  const ScaleOffsets off = scale_offsets(type);
  if (off.d < 0) return std::nullopt;
  const size_t block_bytes = dtype_block_bytes(type);
  // fp16 is inf or NaN exactly when its 5 exponent bits are all ones.
  auto non_finite = [](uint16_t h) { return (h & 0x7c00) == 0x7c00; };
  for (size_t b = 0; b < data.size() / block_bytes; ++b) {
    const std::byte* block = data.data() + b * block_bytes;
    for (auto [field, at] : {std::pair<std::string_view, ptrdiff_t>{"d", off.d}, {off.min_name, off.dmin}}) {
      if (at < 0) continue;
      uint16_t h;
      std::memcpy(&h, block + at, sizeof h);
      if (non_finite(h)) return NonFiniteBlockScale{.block = b, .field = field, .bits = h};
    }
  }
  return std::nullopt;
}

}  // namespace kvs
