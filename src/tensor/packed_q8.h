// Q8_0 weights repacked at load time for the AVX-512 VNNI matmul (matmul_q8_0x16_avx512.cpp).
//
// Why: in GGUF order a Q8_0 row is a run of 34-byte blocks (fp16 scale + 32 int8), so a SIMD kernel
// spends most of its instructions unaligning, unpacking and horizontally reducing per row. Packed, one
// vpdpbusd multiplies 16 rows x 4 columns by 4 broadcast activation bytes and leaves each row's partial
// sum in its own int32 lane: no reduction, aligned loads, and one sequential stream per group of rows.
//
// Layout (PackedQ8Layout): rows in groups of 16 (the last group padded with zero rows, scale 0). A group
// is a contiguous run of group_bytes() bytes, made of units of two 32-column blocks (the last unit holds
// one block when the row has an odd number of blocks):
//   unit u = [64-byte header: fp16 scales of block 2u for rows 0..15, then of block 2u + 1 for rows 0..15]
//            [block 2u: 512 bytes][block 2u + 1: 512 bytes]
//   block  = 8 quads of 64 bytes; quad q holds, for row i (0..15) and j (0..3), byte 4 * i + j =
//            w[row i][32 * b + 4 * q + j] xor 0x80 (the weight plus 128, as the unsigned operand of vpdpbusd).
// Every unit is a multiple of 64 bytes, so with a 64-byte aligned base every load is aligned.
// The values are exactly the Q8_0 ones: unpacking gives the original blocks back bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/aligned_buffer.h"
#include "tensor/weight_view.h"

namespace kvs {

struct PackedQ8Layout {
  static constexpr size_t kGroupRows = 16;
  static constexpr size_t kBlock = 32;
  static constexpr size_t kHeaderBytes = 64;
  static constexpr size_t kBlockBytes = kGroupRows * kBlock;  // 512
  static constexpr size_t kQuadBytes = 64;

  size_t rows = 0;
  size_t cols = 0;  // a multiple of kBlock

  size_t blocks() const { return cols / kBlock; }
  size_t groups() const { return (rows + kGroupRows - 1) / kGroupRows; }
  size_t group_bytes() const { return (blocks() + 1) / 2 * kHeaderBytes + blocks() * kBlockBytes; }
  size_t bytes() const { return groups() * group_bytes(); }
  // Offsets inside a group: block b's 8 quads, and its 16 fp16 scales.
  static size_t block_offset(size_t b) {
    return b / 2 * (kHeaderBytes + 2 * kBlockBytes) + kHeaderBytes + b % 2 * kBlockBytes;
  }
  static size_t scales_offset(size_t b) {
    return b / 2 * (kHeaderBytes + 2 * kBlockBytes) + b % 2 * (kHeaderBytes / 2);
  }
};

// An owned packed copy of a Q8_0 matrix; view() has layout kQ8_0x16 and points into storage.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  const WeightView& view() const { return view_; }

  // w: Q8_0, layout kRows.
  static PackedMatrix pack_q8_0(const WeightView& w);

 private:
  AlignedBuffer<std::byte> storage_;
  WeightView view_;
};

// Does this CPU run the kernel for packed Q8_0 (AVX-512 with VNNI)? Weights are packed only then.
bool packed_q8_supported();

// Row r of a packed matrix back in GGUF order (row_bytes(Q8_0, cols) bytes): for tests and tools.
void unpack_q8_0_row(const WeightView& packed, size_t r, std::byte* out);

}  // namespace kvs
