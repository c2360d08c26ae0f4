// Element types of tensors, with the numeric ids GGUF files use (ggml_type), so files written
// by other tools load. Quantized types come in blocks of `block_elements` values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvs {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
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

// Q4_1: 32 values = fp16 scale d and fp16 min m + 16 bytes of nibbles (laid out as Q4_0's); value = d * nibble + m.
struct BlockQ4_1 {
  static constexpr size_t kElements = 32;
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: Q4_0's nibbles plus a fifth bit per value: bit j of qh (32 bits, little-endian) is the high bit of value j;
// value = d * (q - 16), q = 0..31.
struct BlockQ5_0 {
  static constexpr size_t kElements = 32;
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: Q5_0's 5-bit q with Q4_1's min: value = d * q + m.
struct BlockQ5_1 {
  static constexpr size_t kElements = 32;
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qh[4];
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// IQ4_NL: Q4_0's layout with a non-linear grid: value = d * kIq4Grid[nibble].
struct BlockIQ4_NL {
  static constexpr size_t kElements = 32;
  uint16_t d;  // fp16
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
// The 16 levels of IQ4_NL and IQ4_XS (ggml-common.h's kvalues_iq4nl), denser near 0, as weights are distributed.
inline constexpr int8_t kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_XS: a super-block of 256 values in 8 sub-blocks of 32 on IQ4_NL's grid, each with a 6-bit scale ls (low 4 bits
// in nibble j % 2 of scales_l[j / 2], high 2 bits at bits 2j..2j+1 of scales_h): value = d * (ls - 32) *
// kIq4Grid[nibble]; sub-block j's 16 bytes of qs hold its values as Q4_0's block does.
struct BlockIQ4_XS {
  static constexpr size_t kElements = 256;
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// K-quants (llama.cpp's k-quants, ggml-common.h): super-blocks of 256 values in sub-blocks of 16 or 32, whose
// scales (and mins) are themselves quantized against fp16 super-block scales.
inline constexpr size_t kSuperBlock = 256;

// Q4_K: 8 sub-blocks of 32; value = d * sc[j] * q - dmin * m[j], q = 4 bits. scales[12] packs the 6-bit sc and m
// of the 8 sub-blocks: for j < 4 sc = scales[j] & 63, m = scales[j + 4] & 63; for j >= 4 the low 4 bits come from
// scales[j + 4] (sc: its low nibble, m: its high nibble) and the top 2 from bits 6-7 of scales[j - 4] (sc) and
// scales[j] (m). qs: 4 groups of 32 bytes; group g holds sub-block 2g in its low nibbles, 2g + 1 in its high ones.
struct BlockQ4_K {
  static constexpr size_t kElements = kSuperBlock;
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[12];
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit per value: bit j of qh[l] is the high bit of value l of sub-block j (q = 0..31).
struct BlockQ5_K {
  static constexpr size_t kElements = kSuperBlock;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kElements / 8];
  uint8_t qs[kElements / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16; value = d * scales[j] * (q - 32), q = 6 bits: the low 4 in ql, the high 2 in qh. Each
// half of 128 values has 64 bytes of ql and 32 of qh: value l (l < 32) of quarter k of the half is ql[l + 32 (k % 2)]
// (low nibble for k < 2, high nibble for k >= 2) with bits 2k..2k+1 of qh[l]; its scale is scales[8 half + l / 16 +
// 2k].
struct BlockQ6_K {
  static constexpr size_t kElements = kSuperBlock;
  uint8_t ql[kElements / 2];
  uint8_t qh[kElements / 4];
  int8_t scales[kElements / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q3_K: 16 sub-blocks of 16; value = d * (sc[j] - 32) * (q - (hmask bit ? 0 : 4)), q = 2 bits of qs; sc 6 bits
// packed in scales[12] (low nibbles: scales[0..7], sub-blocks 0-7 in the low and 8-15 in the high nibbles; high
// 2 bits: scales[8..11], 2 bits per sub-block). Value l of 32-value group g (g < 8) of half h uses bits 2(g % 4) of
// qs[32 h + l] and bit g of hmask[l].
struct BlockQ3_K {
  static constexpr size_t kElements = kSuperBlock;
  uint8_t hmask[kElements / 8];
  uint8_t qs[kElements / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q2_K: 16 sub-blocks of 16; value = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q = 2 bits: value l of
// group g (32 values, g < 4) of half h is bits 2g..2g+1 of qs[32 h + l].
struct BlockQ2_K {
  static constexpr size_t kElements = kSuperBlock;
  uint8_t scales[kElements / 16];
  uint8_t qs[kElements / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

std::optional<DType> dtype_from_ggml_id(uint32_t id);
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q4_k",
// "q5_k", "q6_k" (upper case accepted)
std::optional<DType> dtype_from_name(std::string_view name);
std::string_view dtype_name(DType type);
// ggml's name of any type id, supported or not ("q4_1", "iq4_nl", ...), for messages; "" when unknown.
std::string_view ggml_type_name(uint32_t id);
bool is_k_quant(DType type);
// Weights whose matmul takes int8 block activations on the SIMD paths: every quantized type (32-value blocks, IQ4_XS
// and the K-quants).
bool is_block_quantized(DType type);

size_t dtype_block_elements(DType type);  // 1 for plain types, 32 for Q8_0, Q4_0 and kin, 256 for K-quants and IQ4_XS
size_t dtype_block_bytes(DType type);     // bytes of one block
// Bytes of a row of `elements` values; `elements` must be a multiple of the block size.
size_t dtype_row_bytes(DType type, size_t elements);

// A block whose fp16 scale field is not a finite number: such a block decodes to inf or NaN in every value, so a
// file holding one is corrupt (a writer never stores it).
struct NonFiniteBlockScale {
  size_t block = 0;        // index of the block in the run
  std::string_view field;  // "d", "dmin" or "m"
  uint16_t bits = 0;       // the fp16 bits found
};
// The first block of `data` (whole blocks of `type`) whose d (or, for the types with mins, dmin) is inf or NaN;
// nullopt when every scale is finite or `type` has no block scales (f32, f16, bf16).
std::optional<NonFiniteBlockScale> find_non_finite_block_scale(DType type, std::span<const std::byte> data);

}  // namespace kvs
