#include "tensor/packed_q8.h"

#include <cstring>

#include "core/status.h"
#include "tensor/cpu_features.h"
#include "tensor/isa.h"

namespace kvs {
namespace {

constexpr uint8_t kSignFlip = 0x80;

}  // namespace

bool packed_q8_supported() { return isa_supported(Isa::kAvx512) && cpu_has_avx512_vnni(); }

PackedMatrix PackedMatrix::pack_q8_0(const WeightView& w) {
  KVS_ASSERT(w.type == DType::kQ8_0 && w.layout == WeightLayout::kRows,
             "pack_q8_0: needs row-major q8_0 weights, got {}", dtype_name(w.type));
  using L = PackedQ8Layout;
  const L layout{.rows = w.rows, .cols = w.cols};
  PackedMatrix m;
  // Zero-filled: the unused half of an odd last unit's header stays 0.
  m.storage_ = AlignedBuffer<std::byte>(layout.bytes(), PageHint::kHuge);
  // Four columns of a row move as one 32-bit word (quad q of row i = bytes 4q .. 4q + 3 of the block).
  constexpr uint32_t kFlip4 = kSignFlip * 0x01010101u;
  for (size_t g = 0; g < layout.groups(); ++g) {
    std::byte* group = m.storage_.data() + g * layout.group_bytes();
    for (size_t b = 0; b < layout.blocks(); ++b) {
      std::byte* scales = group + L::scales_offset(b);
      std::byte* quads = group + L::block_offset(b);
      for (size_t i = 0; i < L::kGroupRows; ++i) {
        const size_t r = g * L::kGroupRows + i;
        const BlockQ8_0* blk = r < w.rows ? reinterpret_cast<const BlockQ8_0*>(w.row(r)) + b : nullptr;
        const uint16_t d = blk ? blk->d : 0;  // padding rows: scale 0, quants 0 (stored as 0x80)
        std::memcpy(scales + 2 * i, &d, sizeof d);
        for (size_t q = 0; q < L::kBlock / 4; ++q) {
          uint32_t v = 0;
          if (blk) std::memcpy(&v, blk->qs + 4 * q, sizeof v);
          v ^= kFlip4;
          std::memcpy(quads + q * L::kQuadBytes + 4 * i, &v, sizeof v);
        }
      }
    }
  }
  m.view_ = WeightView{.type = DType::kQ8_0,
                       .data = m.storage_.data(),
                       .rows = w.rows,
                       .cols = w.cols,
                       .layout = WeightLayout::kQ8_0x16};
  return m;
}

void unpack_q8_0_row(const WeightView& packed, size_t r, std::byte* out) {
  KVS_ASSERT(packed.layout == WeightLayout::kQ8_0x16 && r < packed.rows, "unpack_q8_0_row: row {} of {}", r,
             packed.rows);
  using L = PackedQ8Layout;
  const L layout{.rows = packed.rows, .cols = packed.cols};
  const std::byte* group = packed.data + r / L::kGroupRows * layout.group_bytes();
  const size_t i = r % L::kGroupRows;
  auto* blocks = reinterpret_cast<BlockQ8_0*>(out);
  for (size_t b = 0; b < layout.blocks(); ++b) {
    std::memcpy(&blocks[b].d, group + L::scales_offset(b) + 2 * i, sizeof(uint16_t));
    const auto* quads = reinterpret_cast<const uint8_t*>(group + L::block_offset(b));
    for (size_t c = 0; c < L::kBlock; ++c) {
      blocks[b].qs[c] = static_cast<int8_t>(quads[c / 4 * L::kQuadBytes + 4 * i + c % 4] ^ kSignFlip);
    }
  }
}

}  // namespace kvs
