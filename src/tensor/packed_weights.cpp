#include "tensor/packed_weights.h"

#include <cstring>

#include "core/status.h"
#include "tensor/cpu_features.h"
#include "tensor/kquant.h"

namespace kvs {
namespace {

constexpr uint8_t kSignFlip = 0x80;

// The file's 4-bit value (w + 8) of element e (0..31) of a Q4_0 block: elements 0-15 are the low nibbles
// of qs, 16-31 the high ones.
uint8_t q4_value(const BlockQ4_0& b, size_t e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }

void set_q4_value(BlockQ4_0& b, size_t e, uint8_t v) {
  if (e < 16) {
    b.qs[e] = static_cast<uint8_t>((b.qs[e] & 0xf0) | v);
  } else {
    b.qs[e - 16] = static_cast<uint8_t>((b.qs[e - 16] & 0x0f) | (v << 4));
  }
}

// The 4-bit value q of element e (0..255) of a Q4_K super-block: block j = e / 32 sits in the low (j even) or
// high (j odd) nibbles of qs[32 (j / 2) ..].
uint8_t q4_k_value(const BlockQ4_K& b, size_t e) {
  const size_t j = e / 32;
  return (b.qs[32 * (j / 2) + e % 32] >> (4 * (j % 2))) & 0x0f;
}

void set_q4_k_value(BlockQ4_K& b, size_t e, uint8_t v) {
  const size_t j = e / 32, shift = 4 * (j % 2);
  uint8_t& byte = b.qs[32 * (j / 2) + e % 32];
  byte = static_cast<uint8_t>((byte & ~(0x0f << shift)) | (v << shift));
}

// Where column c (0..31) of a block of 4-bit values sits in the block's pairs: the byte of row i, and the shift.
size_t nibble_byte(const PackedLayout& p, size_t i, size_t c) { return c / 8 * p.quad_bytes() + 4 * i + c % 4; }
unsigned nibble_shift(size_t c) { return 4 * (c / 4 % 2); }

// Packs row i of the group from the Q4_K row `src` (nullptr: a padding row, all 0): every block of the row.
void pack_q4_k_row(const PackedLayout& p, const BlockQ4_K* src, size_t i, std::byte* group) {
  for (size_t s = 0; s < p.blocks() / PackedLayout::kSuperBlockBlocks; ++s) {
    const size_t b0 = s * PackedLayout::kSuperBlockBlocks;
    std::byte* header = group + p.unit_offset(b0);
    const BlockQ4_K* blk = src ? src + s : nullptr;
    const uint16_t d = blk ? blk->d : 0, dmin = blk ? blk->dmin : 0;
    std::memcpy(header + 2 * i, &d, sizeof d);
    std::memcpy(header + p.k_dmin_offset() + 2 * i, &dmin, sizeof dmin);
    uint8_t sc[8] = {}, m[8] = {};
    if (blk) unpack_k_scales(blk->scales, sc, m);
    for (size_t j = 0; j < PackedLayout::kSuperBlockBlocks; ++j) {
      header[p.k_scales_offset(j) + i] = std::byte{sc[j]};
      header[p.k_mins_offset(j) + i] = std::byte{m[j]};
      auto* quants = reinterpret_cast<uint8_t*>(group + p.block_offset(b0 + j));
      for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
        const uint8_t v = blk ? q4_k_value(*blk, 32 * j + c) : 0;
        quants[nibble_byte(p, i, c)] |= static_cast<uint8_t>(v << nibble_shift(c));
      }
    }
  }
}

void unpack_q4_k_row(const PackedLayout& p, const std::byte* group, size_t i, BlockQ4_K* out) {
  for (size_t s = 0; s < p.blocks() / PackedLayout::kSuperBlockBlocks; ++s) {
    const size_t b0 = s * PackedLayout::kSuperBlockBlocks;
    const std::byte* header = group + p.unit_offset(b0);
    BlockQ4_K& blk = out[s];
    std::memcpy(&blk.d, header + 2 * i, sizeof blk.d);
    std::memcpy(&blk.dmin, header + p.k_dmin_offset() + 2 * i, sizeof blk.dmin);
    uint8_t sc[8], m[8];
    for (size_t j = 0; j < PackedLayout::kSuperBlockBlocks; ++j) {
      sc[j] = std::to_integer<uint8_t>(header[p.k_scales_offset(j) + i]);
      m[j] = std::to_integer<uint8_t>(header[p.k_mins_offset(j) + i]);
      const auto* quants = reinterpret_cast<const uint8_t*>(group + p.block_offset(b0 + j));
      for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
        set_q4_k_value(blk, 32 * j + c, (quants[nibble_byte(p, i, c)] >> nibble_shift(c)) & 0x0f);
      }
    }
    pack_k_scales(sc, m, blk.scales);
  }
}

bool packable(DType type) { return type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_K; }

}  // namespace

PackedLayout PackedLayout::of(const WeightView& w) {
  switch (w.layout) {
    case WeightLayout::kQ8_0x16: return {.type = DType::kQ8_0, .group_rows = 16, .rows = w.rows, .cols = w.cols};
    case WeightLayout::kQ8_0x8: return {.type = DType::kQ8_0, .group_rows = 8, .rows = w.rows, .cols = w.cols};
    case WeightLayout::kQ4_0x16: return {.type = DType::kQ4_0, .group_rows = 16, .rows = w.rows, .cols = w.cols};
    case WeightLayout::kQ4_0x8: return {.type = DType::kQ4_0, .group_rows = 8, .rows = w.rows, .cols = w.cols};
    case WeightLayout::kQ4_Kx16: return {.type = DType::kQ4_K, .group_rows = 16, .rows = w.rows, .cols = w.cols};
    case WeightLayout::kQ4_Kx8: return {.type = DType::kQ4_K, .group_rows = 8, .rows = w.rows, .cols = w.cols};
    case WeightLayout::kRows: break;
  }
  KVS_ASSERT(false, "PackedLayout::of: layout {} is not packed", weight_layout_name(w.layout));
  return {};
}

WeightLayout packed_weight_layout(DType type, size_t group_rows) {
  KVS_ASSERT(packable(type) && (group_rows == 8 || group_rows == 16),
             "packed_weight_layout: no packed layout for {} in groups of {}", dtype_name(type), group_rows);
  const bool x16 = group_rows == 16;
  if (type == DType::kQ8_0) return x16 ? WeightLayout::kQ8_0x16 : WeightLayout::kQ8_0x8;
  if (type == DType::kQ4_0) return x16 ? WeightLayout::kQ4_0x16 : WeightLayout::kQ4_0x8;
  return x16 ? WeightLayout::kQ4_Kx16 : WeightLayout::kQ4_Kx8;
}

std::optional<WeightLayout> packed_layout_for(DType type, Isa isa) {
  if (!packable(type) || isa == Isa::kScalar || !isa_supported(isa)) {
    return std::nullopt;
  }
  const bool avx512_vnni = isa == Isa::kAvx512 && cpu_has_avx512_vnni();
  return packed_weight_layout(type, avx512_vnni ? 16 : 8);
}

PackedMatrix PackedMatrix::pack(const WeightView& w, WeightLayout layout) {
  KVS_ASSERT(packable(w.type) && w.layout == WeightLayout::kRows,
             "PackedMatrix::pack: needs row-major q8_0, q4_0 or q4_k weights, got {} ({})", dtype_name(w.type),
             weight_layout_name(w.layout));
  PackedMatrix m;
  m.view_ = WeightView{.type = w.type, .data = nullptr, .rows = w.rows, .cols = w.cols, .layout = layout};
  const PackedLayout p = PackedLayout::of(m.view_);
  KVS_ASSERT(p.type == w.type, "PackedMatrix::pack: layout {} is not for {} weights", weight_layout_name(layout),
             dtype_name(w.type));
  // Zero-filled: the unused half of an odd last unit's header stays 0.
  m.storage_ = AlignedBuffer<std::byte>(p.bytes(), PageHint::kHuge);
  m.view_.data = m.storage_.data();
  const size_t g_rows = p.group_rows;
  for (size_t g = 0; g < p.groups(); ++g) {
    std::byte* group = m.storage_.data() + g * p.group_bytes();
    if (p.k_quant()) {
      for (size_t i = 0; i < g_rows; ++i) {
        const size_t r = g * g_rows + i;
        pack_q4_k_row(p, r < w.rows ? reinterpret_cast<const BlockQ4_K*>(w.row(r)) : nullptr, i, group);
      }
      continue;
    }
    for (size_t b = 0; b < p.blocks(); ++b) {
      std::byte* scales = group + p.scales_offset(b);
      auto* quants = reinterpret_cast<uint8_t*>(group + p.block_offset(b));
      for (size_t i = 0; i < g_rows; ++i) {
        const size_t r = g * g_rows + i;
        const bool real = r < w.rows;  // padding rows: scale 0, values 0 (stored as 0x80 / 8)
        uint16_t d = 0;
        if (w.type == DType::kQ8_0) {
          const BlockQ8_0* blk = real ? reinterpret_cast<const BlockQ8_0*>(w.row(r)) + b : nullptr;
          if (blk) d = blk->d;
          for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
            const auto v = static_cast<uint8_t>(blk ? blk->qs[c] : 0);
            quants[c / 4 * p.quad_bytes() + 4 * i + c % 4] = static_cast<uint8_t>(v ^ kSignFlip);
          }
        } else {
          const BlockQ4_0* blk = real ? reinterpret_cast<const BlockQ4_0*>(w.row(r)) + b : nullptr;
          if (blk) d = blk->d;
          for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
            const uint8_t v = blk ? q4_value(*blk, c) : 8;
            quants[nibble_byte(p, i, c)] |= static_cast<uint8_t>(v << nibble_shift(c));
          }
        }
        std::memcpy(scales + 2 * i, &d, sizeof d);
      }
    }
  }
  return m;
}

void unpack_row(const WeightView& packed, size_t r, std::byte* out) {
  KVS_ASSERT(is_packed(packed.layout) && r < packed.rows, "unpack_row: row {} of {} ({})", r, packed.rows,
             weight_layout_name(packed.layout));
  const PackedLayout p = PackedLayout::of(packed);
  const std::byte* group = packed.data + r / p.group_rows * p.group_bytes();
  const size_t i = r % p.group_rows;
  if (p.k_quant()) {
    unpack_q4_k_row(p, group, i, reinterpret_cast<BlockQ4_K*>(out));
    return;
  }
  for (size_t b = 0; b < p.blocks(); ++b) {
    const std::byte* scale = group + p.scales_offset(b) + 2 * i;
    const auto* quants = reinterpret_cast<const uint8_t*>(group + p.block_offset(b));
    if (p.type == DType::kQ8_0) {
      BlockQ8_0& blk = reinterpret_cast<BlockQ8_0*>(out)[b];
      std::memcpy(&blk.d, scale, sizeof(uint16_t));
      for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
        blk.qs[c] = static_cast<int8_t>(quants[c / 4 * p.quad_bytes() + 4 * i + c % 4] ^ kSignFlip);
      }
    } else {
      BlockQ4_0& blk = reinterpret_cast<BlockQ4_0*>(out)[b];
      std::memcpy(&blk.d, scale, sizeof(uint16_t));
      for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
        set_q4_value(blk, c, (quants[nibble_byte(p, i, c)] >> nibble_shift(c)) & 0x0f);
      }
    }
  }
}

}  // namespace kvs
