#include "tensor/packed_weights.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>

#include "core/status.h"
#include "tensor/cpu_features.h"
#include "tensor/float_panels.h"
#include "tensor/kquant.h"
#include "tensor/legacy_iq4_quant.h"

namespace kvs {
namespace {

constexpr uint8_t kSignFlip = 0x80;

// A super-block as the packed layout stores it: fp16 d (and dmin: Q4_K, Q5_K), the per-block scales as bytes (Q4_K,
// Q5_K: 8 6-bit scales and 8 mins; Q6_K: 16 int8 scales, one per 16 values; IQ4_XS: 8 int8 scales ls - 32) and the
// unsigned values q (Q4_K, IQ4_XS: 0..15; Q5_K: 0..31; Q6_K: 0..63, the value is d scale (q - 32)).
struct KFields {
  uint16_t d = 0, dmin = 0;
  uint8_t scales[16] = {};
  uint8_t mins[8] = {};
  uint8_t q[kSuperBlock] = {};
};

size_t k_scale_count(DType type) { return type == DType::kQ6_K ? 16 : 8; }
bool k_has_mins(DType type) { return type == DType::kQ4_K || type == DType::kQ5_K; }

// Q4_K element e: block j = e / 32 in the low (j even) or high (j odd) nibbles of qs[32 (j / 2) ..]; Q5_K the
// same, with its fifth bit at bit j of qh[e % 32].
// Q6_K element e = 128 h + 32 k + l: low 4 bits in ql[64 h + 32 (k % 2) + l] (nibble k / 2), high 2 bits at
// bits 2k of qh[32 h + l].
KFields read_k_fields(DType type, const std::byte* p) {
  KFields f;
  const auto q4_q5 = [&f](const auto& b, const uint8_t* qh) {
    f.d = b.d;
    f.dmin = b.dmin;
    unpack_k_scales(b.scales, f.scales, f.mins);
    for (size_t e = 0; e < kSuperBlock; ++e) {
      const int low = (b.qs[32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 0x0f;
      const int high = qh ? (qh[e % 32] >> (e / 32)) & 1 : 0;
      f.q[e] = static_cast<uint8_t>(low | (high << 4));
    }
  };
  if (type == DType::kIQ4_XS) {
    const Iq4XsLevels x = read_iq4_xs_levels(p);
    f.d = x.d;
    for (size_t j = 0; j < 8; ++j) f.scales[j] = static_cast<uint8_t>(x.scales[j]);
    std::memcpy(f.q, x.levels, sizeof f.q);
  } else if (type == DType::kQ4_K) {
    q4_q5(*reinterpret_cast<const BlockQ4_K*>(p), nullptr);
  } else if (type == DType::kQ5_K) {
    const auto& b = *reinterpret_cast<const BlockQ5_K*>(p);
    q4_q5(b, b.qh);
  } else {
    const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
    f.d = b.d;
    std::memcpy(f.scales, b.scales, sizeof b.scales);
    for (size_t e = 0; e < kSuperBlock; ++e) {
      const size_t h = e / 128, k = e % 128 / 32, l = e % 32;
      const int low = (b.ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
      const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
      f.q[e] = static_cast<uint8_t>(low | (high << 4));
    }
  }
  return f;
}

void write_k_fields(DType type, const KFields& f, std::byte* p) {
  const auto q4_q5 = [&f](auto& b, uint8_t* qh) {
    b.d = f.d;
    b.dmin = f.dmin;
    pack_k_scales(f.scales, f.mins, b.scales);
    std::memset(b.qs, 0, sizeof b.qs);
    for (size_t e = 0; e < kSuperBlock; ++e) {
      b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>((f.q[e] & 0x0f) << (4 * (e / 32 % 2)));
      if (qh) qh[e % 32] |= static_cast<uint8_t>((f.q[e] >> 4) << (e / 32));
    }
  };
  if (type == DType::kIQ4_XS) {
    Iq4XsLevels x;
    x.d = f.d;
    for (size_t j = 0; j < 8; ++j) x.scales[j] = static_cast<int8_t>(f.scales[j]);
    std::memcpy(x.levels, f.q, sizeof x.levels);
    write_iq4_xs_levels(x, p);
  } else if (type == DType::kQ4_K) {
    q4_q5(*reinterpret_cast<BlockQ4_K*>(p), nullptr);
  } else if (type == DType::kQ5_K) {
    auto& b = *reinterpret_cast<BlockQ5_K*>(p);
    std::memset(b.qh, 0, sizeof b.qh);
    q4_q5(b, b.qh);
  } else {
    auto& b = *reinterpret_cast<BlockQ6_K*>(p);
    b.d = f.d;
    std::memcpy(b.scales, f.scales, sizeof b.scales);
    std::memset(b.ql, 0, sizeof b.ql);
    std::memset(b.qh, 0, sizeof b.qh);
    for (size_t e = 0; e < kSuperBlock; ++e) {
      const size_t h = e / 128, k = e % 128 / 32, l = e % 32;
      b.ql[64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((f.q[e] & 0x0f) << (4 * (k / 2)));
      b.qh[32 * h + l] |= static_cast<uint8_t>((f.q[e] >> 4) << (2 * k));
    }
  }
}

// Where column c (0..31) of a block of 4-bit values sits in the block's pairs: the byte of row i, and the shift.
size_t nibble_byte(const PackedLayout& p, size_t i, size_t c) { return c / 8 * p.quad_bytes() + 4 * i + c % 4; }
unsigned nibble_shift(size_t c) { return 4 * (c / 4 % 2); }
// The bits of column c's value above its low nibble, in the block's vectors after its pairs: the 5-bit types' fifth
// bit at bit c / 4 (the quad) of their one vector, Q6_K's bits 4-5 at bits 2 (c / 4 % 4) of vector c / 16.
struct HighBits {
  size_t byte;
  unsigned shift;
  uint8_t mask;
};
HighBits high_bits(const PackedLayout& p, size_t i, size_t c) {
  if (p.five_bit()) return {4 * p.quad_bytes() + 4 * i + c % 4, static_cast<unsigned>(c / 4), 1};
  return {(4 + c / 16) * p.quad_bytes() + 4 * i + c % 4, static_cast<unsigned>(2 * (c / 4 % 4)), 3};
}
bool k_has_high_bits(DType type) { return type == DType::kQ5_K || type == DType::kQ6_K; }

// Row i's bytes of one block of levels (0..15, or up to 6 bits with high-bit vectors) in the layout nibble_byte and
// high_bits describe, each byte whole at once (the same bytes as placing value by value; loading a 1B model packs
// about 10^9 of them).
void store_block_levels(const PackedLayout& p, const uint8_t* levels, size_t i, uint8_t* quants) {
  const size_t qb = p.quad_bytes();
  for (size_t pair = 0; pair < 4; ++pair) {  // columns 8 pair + k (low nibble) and 8 pair + 4 + k (high)
    for (size_t k = 0; k < 4; ++k) {
      quants[pair * qb + 4 * i + k] =
          static_cast<uint8_t>((levels[8 * pair + k] & 0x0f) | ((levels[8 * pair + 4 + k] & 0x0f) << 4));
    }
  }
  if (p.five_bit()) {  // the fifth bit of column 4 quad + k at bit quad
    for (size_t k = 0; k < 4; ++k) {
      unsigned byte = 0;
      for (size_t quad = 0; quad < 8; ++quad) byte |= ((levels[4 * quad + k] >> 4) & 1u) << quad;
      quants[4 * qb + 4 * i + k] = static_cast<uint8_t>(byte);
    }
  } else if (p.type == DType::kQ6_K) {  // bits 4-5 of column 16 h + 4 qq + k at bits 2 qq of vector h
    for (size_t h = 0; h < 2; ++h) {
      for (size_t k = 0; k < 4; ++k) {
        unsigned byte = 0;
        for (size_t qq = 0; qq < 4; ++qq) byte |= ((levels[16 * h + 4 * qq + k] >> 4) & 3u) << (2 * qq);
        quants[(4 + h) * qb + 4 * i + k] = static_cast<uint8_t>(byte);
      }
    }
  }
}

// Packs row i of the group from the super-block row `src` (nullptr: a padding row, all 0).
void pack_k_row(const PackedLayout& p, const std::byte* src, size_t i, std::byte* group) {
  const bool mins = k_has_mins(p.type);
  for (size_t s = 0; s < p.blocks() / PackedLayout::kSuperBlockBlocks; ++s) {
    const size_t b0 = s * PackedLayout::kSuperBlockBlocks;
    const KFields f = src ? read_k_fields(p.type, src + s * dtype_block_bytes(p.type)) : KFields{};
    std::byte* header = group + p.unit_offset(b0);
    std::memcpy(header + 2 * i, &f.d, sizeof f.d);
    if (mins) std::memcpy(header + p.k_dmin_offset() + 2 * i, &f.dmin, sizeof f.dmin);
    for (size_t j = 0; j < k_scale_count(p.type); ++j) header[p.k_scales_offset(j) + i] = std::byte{f.scales[j]};
    if (mins)
      for (size_t j = 0; j < 8; ++j) header[p.k_mins_offset(j) + i] = std::byte{f.mins[j]};
    for (size_t j = 0; j < PackedLayout::kSuperBlockBlocks; ++j) {
      store_block_levels(p, f.q + 32 * j, i, reinterpret_cast<uint8_t*>(group + p.block_offset(b0 + j)));
    }
  }
}

void unpack_k_row(const PackedLayout& p, const std::byte* group, size_t i, std::byte* out) {
  const bool mins = k_has_mins(p.type), high = k_has_high_bits(p.type);
  for (size_t s = 0; s < p.blocks() / PackedLayout::kSuperBlockBlocks; ++s) {
    const size_t b0 = s * PackedLayout::kSuperBlockBlocks;
    const std::byte* header = group + p.unit_offset(b0);
    KFields f;
    std::memcpy(&f.d, header + 2 * i, sizeof f.d);
    if (mins) std::memcpy(&f.dmin, header + p.k_dmin_offset() + 2 * i, sizeof f.dmin);
    for (size_t j = 0; j < k_scale_count(p.type); ++j)
      f.scales[j] = std::to_integer<uint8_t>(header[p.k_scales_offset(j) + i]);
    if (mins)
      for (size_t j = 0; j < 8; ++j) f.mins[j] = std::to_integer<uint8_t>(header[p.k_mins_offset(j) + i]);
    for (size_t j = 0; j < PackedLayout::kSuperBlockBlocks; ++j) {
      const auto* quants = reinterpret_cast<const uint8_t*>(group + p.block_offset(b0 + j));
      for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
        int v = (quants[nibble_byte(p, i, c)] >> nibble_shift(c)) & 0x0f;
        if (high) {
          const HighBits h = high_bits(p, i, c);
          v |= ((quants[h.byte] >> h.shift) & h.mask) << 4;
        }
        f.q[32 * j + c] = static_cast<uint8_t>(v);
      }
    }
    write_k_fields(p.type, f, out + s * dtype_block_bytes(p.type));
  }
}

// Packs block b of row i of the group from the 32-value levels f (Q8_0: the raw int8 values, stored xor 0x80).
void pack_block32(const PackedLayout& p, const BlockLevels32& f, size_t b, size_t i, std::byte* group) {
  std::memcpy(group + p.scales_offset(b) + 2 * i, &f.d, sizeof f.d);
  if (p.block_mins()) std::memcpy(group + p.mins_offset(b) + 2 * i, &f.m, sizeof f.m);
  auto* quants = reinterpret_cast<uint8_t*>(group + p.block_offset(b));
  if (p.type != DType::kQ8_0) {
    store_block_levels(p, f.levels, i, quants);
    return;
  }
  for (size_t c = 0; c < PackedLayout::kBlock; ++c)
    quants[c / 4 * p.quad_bytes() + 4 * i + c % 4] = static_cast<uint8_t>(f.levels[c] ^ kSignFlip);
}

BlockLevels32 unpack_block32(const PackedLayout& p, const std::byte* group, size_t b, size_t i) {
  BlockLevels32 f;
  std::memcpy(&f.d, group + p.scales_offset(b) + 2 * i, sizeof f.d);
  if (p.block_mins()) std::memcpy(&f.m, group + p.mins_offset(b) + 2 * i, sizeof f.m);
  const auto* quants = reinterpret_cast<const uint8_t*>(group + p.block_offset(b));
  for (size_t c = 0; c < PackedLayout::kBlock; ++c) {
    if (p.type == DType::kQ8_0) {
      f.levels[c] = static_cast<uint8_t>(quants[c / 4 * p.quad_bytes() + 4 * i + c % 4] ^ kSignFlip);
      continue;
    }
    int v = (quants[nibble_byte(p, i, c)] >> nibble_shift(c)) & 0x0f;
    if (p.five_bit()) {
      const HighBits h = high_bits(p, i, c);
      v |= ((quants[h.byte] >> h.shift) & h.mask) << 4;
    }
    f.levels[c] = static_cast<uint8_t>(v);
  }
  return f;
}

// Block b of a 32-value row (nullptr: a padding row, scale 0 and the level of value 0 where there is one).
BlockLevels32 read_block32(DType type, const std::byte* row, size_t b) {
  if (type == DType::kQ8_0) {
    BlockLevels32 f;
    if (row) {
      const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
      f.d = blk.d;
      std::memcpy(f.levels, blk.qs, sizeof f.levels);
    }
    return f;
  }
  if (row) return read_block_levels32(type, row, b);
  BlockLevels32 f;
  const uint8_t zero = type == DType::kQ4_0 ? 8 : type == DType::kQ5_0 ? 16 : 0;
  std::fill(std::begin(f.levels), std::end(f.levels), zero);
  return f;
}

void write_block32(DType type, const BlockLevels32& f, std::byte* row, size_t b) {
  if (type != DType::kQ8_0) {
    write_block_levels32(type, f, row, b);
    return;
  }
  BlockQ8_0& blk = reinterpret_cast<BlockQ8_0*>(row)[b];
  blk.d = f.d;
  std::memcpy(blk.qs, f.levels, sizeof blk.qs);
}

}  // namespace

bool packable(DType type) { return is_block_quantized(type) && type != DType::kQ2_K && type != DType::kQ3_K; }

PackedLayout PackedLayout::of(const WeightView& w) {
  KVS_ASSERT(is_packed(w.layout) && packable(w.type), "PackedLayout::of: {} weights in layout {} are not packed",
             dtype_name(w.type), weight_layout_name(w.layout));
  return {.type = w.type,
          .group_rows = w.layout == WeightLayout::kPackedX16 ? size_t{16} : size_t{8},
          .rows = w.rows,
          .cols = w.cols};
}

WeightLayout packed_weight_layout(size_t group_rows) {
  KVS_ASSERT(group_rows == 8 || group_rows == 16, "packed_weight_layout: no packed layout in groups of {}", group_rows);
  return group_rows == 16 ? WeightLayout::kPackedX16 : WeightLayout::kPackedX8;
}

std::optional<WeightLayout> packed_layout_for(DType type, Isa isa) {
  if (!(packable(type) || float_panel_type(type)) || isa == Isa::kScalar || !isa_supported(isa)) {
    return std::nullopt;
  }
  if (float_panel_type(type)) return packed_weight_layout(isa == Isa::kAvx512 ? 16 : 8);
  const bool avx512_vnni = isa == Isa::kAvx512 && cpu_has_avx512_vnni();
  return packed_weight_layout(avx512_vnni ? 16 : 8);
}

PackedMatrix PackedMatrix::pack(const WeightView& w, WeightLayout layout, ThreadPool* pool) {
  KVS_ASSERT((packable(w.type) || float_panel_type(w.type)) && w.layout == WeightLayout::kRows && is_packed(layout),
             "PackedMatrix::pack: needs row-major weights of a packable type, got {} ({})", dtype_name(w.type),
             weight_layout_name(w.layout));
  PackedMatrix m;
  m.view_ = WeightView{.type = w.type, .data = nullptr, .rows = w.rows, .cols = w.cols, .layout = layout};
  // Zero-filled: the unused half of an odd last unit's header, padding rows and a BF16 pad column stay 0.
  m.storage_ = AlignedBuffer<std::byte>(m.view_.bytes(), PageHint::kHuge);
  m.view_.data = m.storage_.data();
  std::function<void(size_t, size_t)> pack_range;
  size_t groups = 0;
  if (float_panel_type(w.type)) {
    const FloatPanelLayout p = FloatPanelLayout::of(m.view_);
    groups = p.groups();
    pack_range = [&w, p, &m](size_t begin, size_t end) { pack_float_panels(w, p, begin, end, m.storage_.data()); };
  } else {
    const PackedLayout p = PackedLayout::of(m.view_);
    groups = p.groups();
    pack_range = [&w, p, &m](size_t begin, size_t end) { pack_groups(w, p, begin, end, m.storage_); };
  }
  if (pool) {
    pool->parallel_for(groups, 1, pack_range);
  } else {
    pack_range(0, groups);
  }
  return m;
}

void PackedMatrix::pack_groups(const WeightView& w, const PackedLayout& p, size_t g_begin, size_t g_end,
                               AlignedBuffer<std::byte>& storage) {
  for (size_t g = g_begin; g < g_end; ++g) {
    std::byte* group = storage.data() + g * p.group_bytes();
    for (size_t i = 0; i < p.group_rows; ++i) {
      const size_t r = g * p.group_rows + i;
      const std::byte* row = r < w.rows ? w.row(r) : nullptr;
      if (p.super_blocks()) {
        pack_k_row(p, row, i, group);
      } else {
        for (size_t b = 0; b < p.blocks(); ++b) pack_block32(p, read_block32(p.type, row, b), b, i, group);
      }
    }
  }
}

void unpack_row(const WeightView& packed, size_t r, std::byte* out) {
  KVS_ASSERT(is_packed(packed.layout) && r < packed.rows, "unpack_row: row {} of {} ({})", r, packed.rows,
             weight_layout_name(packed.layout));
  if (float_panel_type(packed.type)) {
    unpack_float_panel_row(packed, r, out);
    return;
  }
  const PackedLayout p = PackedLayout::of(packed);
  const std::byte* group = packed.data + r / p.group_rows * p.group_bytes();
  const size_t i = r % p.group_rows;
  if (p.super_blocks()) {
    unpack_k_row(p, group, i, out);
    return;
  }
  for (size_t b = 0; b < p.blocks(); ++b) write_block32(p.type, unpack_block32(p, group, b, i), out, b);
}

}  // namespace kvs
