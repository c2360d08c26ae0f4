// Block-quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q4_K, Q5_K, Q6_K) repacked at load time for
// the int8 dot-product kernels (matmul_packed_*.cpp).
//
// Why: in GGUF order a row is a run of blocks (fp16 scale + 32 values), so a SIMD kernel spends most of its
// instructions unaligning, unpacking and horizontally reducing per row. Packed, one vpdpbusd (or its AVX2
// emulation) multiplies G rows x 4 columns by 4 broadcast activation bytes and leaves each row's partial sum
// in its own int32 lane: no reduction, aligned loads, and one sequential stream per group of rows.
// G = 16 for the AVX-512 kernel (a zmm of 16 int32 lanes), 8 for the AVX2 and AVX-VNNI kernels (a ymm).
//
// Layout (PackedLayout): rows in groups of G (the last group padded with zero rows, scale 0). A group is a
// contiguous run of group_bytes() bytes, made of units of unit_blocks() 32-column blocks: two for the 32-value
// types (the last unit holds one block when the row has an odd number of blocks), eight (a super-block) for
// the K-quants and IQ4_XS:
//   Q8_0, Q4_0, Q5_0, IQ4_NL: unit u = [header, 4G bytes: fp16 scales of block 2u for rows 0..G-1, then of block
//                         2u + 1] [block 2u: quant_bytes()][block 2u + 1: quant_bytes()]
//   Q4_1, Q5_1: the same with a header of 8G bytes: the scales, then the fp16 mins of block 2u, then of 2u + 1
//   Q4_K:       unit u = [header, 20G bytes: d of super-block u for rows 0..G-1 (fp16), then dmin (fp16),
//                         then per block j = 0..7 the rows' 6-bit scales (one byte each), then per block
//                         their 6-bit mins]
//                        [block 8u: quant_bytes()] ... [block 8u + 7]
//                (4 bytes per row and super-block more than the file's 12 packed bytes: 2.8%)
//   Q5_K:       as Q4_K (2.3% more than the file)
//   Q6_K:       unit u = [header, 20G bytes: d (fp16), 2G bytes of padding, then per 16-column group g = 0..15
//                         the rows' int8 scales]
//                        [block 8u: quant_bytes()] ... [block 8u + 7]   (the file's size plus 2G bytes: 1%)
//   IQ4_XS:     unit u = [header, 12G bytes: d (fp16), 2G bytes of padding, then per block j = 0..7 the rows'
//                         signed scales ls - 32]
//                        [block 8u: quant_bytes()] ... [block 8u + 7]   (the file's size plus 4G bytes: 2.9%)
//   Q8_0 block = 8 quads of 4G bytes; quad q holds, for row i (0..G-1) and j (0..3), byte 4i + j =
//                w[row i][32b + 4q + j] xor 0x80 (the weight plus 128: the unsigned operand of vpdpbusd).
//   Q4_0 block = 4 pairs of 4G bytes; byte 4i + j of pair p holds the file's 4-bit values (w + 8, 0..15) of
//                w[row i][32b + 8p + j] in its low nibble and of w[row i][32b + 8p + 4 + j] in its high
//                nibble: the low nibbles are quad 2p, the high ones quad 2p + 1.
//   Q4_1, IQ4_NL, IQ4_XS, Q4_K block = the same 4 pairs of the rows' 4-bit levels (0..15; the value is d q + m,
//                d kIq4Grid[q], d (ls - 32) kIq4Grid[q], d sc q - dmin m).
//   Q5_0, Q5_1, Q5_K block = the same 4 pairs of the low 4 bits of the rows' 5-bit levels q (0..31; the value is
//                d (q - 16), d q + m, d sc q - dmin m), then one vector of their fifth bits: bit q of byte 4i + j
//                for quad q.
//   Q6_K block = the same 4 pairs of the low 4 bits of the rows' 6-bit values q (0..63; the value is
//                d sc (q - 32)), then 2 vectors of their high 2 bits: byte 4i + j of vector h holds them for
//                quads 4h..4h + 3 (the block's 16-column group h) at bits 0-1, 2-3, 4-5, 6-7.
// Every unit is a multiple of 4G bytes (32 or 64), so with an aligned base every vector load is aligned.
// The values are exactly the file's: unpacking gives the original blocks back bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "tensor/isa.h"
#include "tensor/weight_view.h"

namespace kvs {

struct PackedLayout {
  static constexpr size_t kBlock = 32;

  static constexpr size_t kSuperBlockBlocks = 8;  // K-quants and IQ4_XS: 32-column blocks per super-block

  DType type = DType::kQ8_0;  // a packable type (packable())
  size_t group_rows = 16;     // G: 8 or 16
  size_t rows = 0;
  size_t cols = 0;  // a multiple of kBlock

  static PackedLayout of(const WeightView& w);  // w.layout packed

  // Units of a super-block (K-quants, IQ4_XS) or of two 32-value blocks.
  constexpr bool super_blocks() const {
    return type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K || type == DType::kIQ4_XS;
  }
  constexpr bool block_mins() const { return type == DType::kQ4_1 || type == DType::kQ5_1; }  // per-block fp16 mins
  constexpr bool five_bit() const { return type == DType::kQ5_0 || type == DType::kQ5_1 || type == DType::kQ5_K; }
  constexpr size_t quad_bytes() const { return 4 * group_rows; }  // 4 columns of G rows: one vector
  constexpr size_t unit_blocks() const { return super_blocks() ? kSuperBlockBlocks : 2; }
  constexpr size_t header_bytes() const {
    if (super_blocks()) return (type == DType::kIQ4_XS ? 12 : 20) * group_rows;
    return (block_mins() ? 8 : 4) * group_rows;
  }
  constexpr size_t quant_bytes() const {  // one block of a group
    return (type == DType::kQ8_0 ? 8 : type == DType::kQ6_K ? 6 : five_bit() ? 5 : 4) * quad_bytes();
  }
  constexpr size_t blocks() const { return cols / kBlock; }
  constexpr size_t groups() const { return (rows + group_rows - 1) / group_rows; }
  constexpr size_t unit_bytes() const { return header_bytes() + unit_blocks() * quant_bytes(); }
  constexpr size_t group_bytes() const {
    return (blocks() + unit_blocks() - 1) / unit_blocks() * header_bytes() + blocks() * quant_bytes();
  }
  constexpr size_t bytes() const { return groups() * group_bytes(); }
  // Offsets inside a group: the header of block b's unit, and block b's quads (or pairs).
  constexpr size_t unit_offset(size_t b) const { return b / unit_blocks() * unit_bytes(); }
  constexpr size_t block_offset(size_t b) const {
    return unit_offset(b) + header_bytes() + b % unit_blocks() * quant_bytes();
  }
  // 32-value types: block b's G fp16 scales, and its G fp16 mins (Q4_1, Q5_1).
  constexpr size_t scales_offset(size_t b) const { return unit_offset(b) + b % 2 * 2 * group_rows; }
  constexpr size_t mins_offset(size_t b) const { return unit_offset(b) + (4 + b % 2 * 2) * group_rows; }
  // Super-blocks, inside a unit's header: the G fp16 dmin (Q4_K, Q5_K), the G bytes of scales of block j (Q4_K, Q5_K,
  // IQ4_XS: 0..7) or of 16-column group j (Q6_K, 0..15), and of mins of block j (Q4_K, Q5_K).
  constexpr size_t k_dmin_offset() const { return 2 * group_rows; }
  constexpr size_t k_scales_offset(size_t j) const { return (4 + j) * group_rows; }
  constexpr size_t k_mins_offset(size_t j) const { return (12 + j) * group_rows; }
};

// Whether `type` has a packed layout (is_block_quantized but Q2_K and Q3_K).
bool packable(DType type);

// The packed layout in groups of `group_rows` (8 or 16).
WeightLayout packed_weight_layout(size_t group_rows);

// The layout the kernels of `isa` read fastest for `type`: G = 16 with AVX-512 VNNI, G = 8 with AVX2 (with or
// without AVX-VNNI); for F16 and BF16, panels of 16 rows with AVX-512 and of 8 with AVX2 (tensor/float_panels.h);
// nullopt when `type` is neither packable nor a float panel type, or no packed kernel runs (scalar).
std::optional<WeightLayout> packed_layout_for(DType type, Isa isa = best_isa());

// An owned packed copy of a matrix of a packable type, or of F16/BF16 weights in float panels; view() points into
// storage.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  const WeightView& view() const { return view_; }

  // w: a packable type or F16/BF16, layout kRows; `layout` packed. With a pool, its threads
  // pack groups of rows side by side (each group is written by one thread; the bytes are the same).
  static PackedMatrix pack(const WeightView& w, WeightLayout layout, ThreadPool* pool = nullptr);

 private:
  // Packs row groups [g_begin, g_end) of w into storage (zero-filled, p.bytes() long).
  static void pack_groups(const WeightView& w, const PackedLayout& p, size_t g_begin, size_t g_end,
                          AlignedBuffer<std::byte>& storage);

  AlignedBuffer<std::byte> storage_;
  WeightView view_;
};

// Row r of a packed matrix back in GGUF order (row_bytes(type, cols) bytes): for tests and tools.
void unpack_row(const WeightView& packed, size_t r, std::byte* out);

}  // namespace kvs
