#include "tensor/legacy_iq4_quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "core/status.h"

namespace kvs {
namespace {

// Q4_0's nibble layout, shared by every 32-value type here and by IQ4_XS's sub-blocks: levels 0-15 of a block in the
// low nibbles of its 16 bytes, 16-31 in the high ones.
void read_nibbles(const uint8_t qs[16], uint8_t levels[32]) {
  for (size_t j = 0; j < 16; ++j) {
    levels[j] = qs[j] & 0x0f;
    levels[j + 16] = qs[j] >> 4;
  }
}
void write_nibbles(const uint8_t levels[32], uint8_t qs[16]) {
  for (size_t j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4));
}
// The fifth bits: bit j of qh (32 bits, little-endian) is bit 4 of level j.
void read_fifth_bits(const uint8_t qh[4], uint8_t levels[32]) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof h);
  for (size_t j = 0; j < 32; ++j) levels[j] = static_cast<uint8_t>(levels[j] | (((h >> j) & 1u) << 4));
}
void write_fifth_bits(const uint8_t levels[32], uint8_t qh[4]) {
  uint32_t h = 0;
  for (size_t j = 0; j < 32; ++j) h |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
  std::memcpy(qh, &h, sizeof h);
}

template <typename Block>
Block& block_at(std::byte* p, size_t b) {
  return reinterpret_cast<Block*>(p)[b];
}
template <typename Block>
const Block& block_at(const std::byte* p, size_t b) {
  return reinterpret_cast<const Block*>(p)[b];
}

// Affine levels of 32 values for Q4_1 / Q5_1: d = (max - min) / top, level = round((x - min) / d).
BlockLevels32 quantize_affine(const float* x, int top) {
  BlockLevels32 f;
  float lo = x[0], hi = x[0];
  for (size_t j = 1; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / static_cast<float>(top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  f.d = fp32_to_fp16(d);
  f.m = fp32_to_fp16(lo);
  for (size_t j = 0; j < 32; ++j)
    f.levels[j] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround((x[j] - lo) * id)), 0, top));
  return f;
}

// The grid index nearest to v (in units of the scale): the grid ascends, so it is the number of midpoints between
// neighbouring levels below v (v on a midpoint: the lower level).
uint8_t nearest_grid_index(float v) {
  static constexpr auto kMidpoints = [] {
    std::array<float, 15> m{};
    for (size_t i = 0; i < m.size(); ++i) m[i] = 0.5f * static_cast<float>(kIq4Grid[i] + kIq4Grid[i + 1]);
    return m;
  }();
  int index = 0;
  for (float m : kMidpoints) index += v > m;
  return static_cast<uint8_t>(index);
}

// The scale of `n` values on IQ4's grid with the least squared error, among scales that put the value of largest
// magnitude on a grid level near either end, and the indices it gives; returns the scale.
float best_grid_scale(const float* x, size_t n, uint8_t* indices) {
  float amax = 0.0f, max = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    std::fill_n(indices, n, nearest_grid_index(0.0f));
    return 0.0f;
  }
  float best_d = 0.0f, best_err = std::numeric_limits<float>::infinity();
  for (int step = -8; step <= 8; ++step) {
    // The extreme value mapped to -127 (a negative max) or 113 (a positive one), stretched by up to +-8%.
    const float d = max / (max < 0 ? -127.0f : 113.0f) * (1.0f + 0.01f * static_cast<float>(step));
    float err = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      const float e = x[j] - d * kIq4Grid[nearest_grid_index(x[j] / d)];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_d = d;
    }
  }
  for (size_t j = 0; j < n; ++j) indices[j] = nearest_grid_index(x[j] / best_d);
  return best_d;
}

// One IQ4_XS super-block: each sub-block's best scale, then one super-block scale d with 6-bit multiples (ls - 32) of
// it; the indices are chosen again against the scale the block will hold.
void quantize_iq4_xs(const float* x, std::byte* out) {
  Iq4XsLevels f;
  float scales[8], amax = 0.0f;
  for (size_t s = 0; s < 8; ++s) {
    scales[s] = best_grid_scale(x + 32 * s, 32, f.levels + 32 * s);
    if (std::fabs(scales[s]) > std::fabs(amax)) amax = scales[s];
  }
  f.d = fp32_to_fp16(amax / -32.0f);
  const float dh = fp16_to_fp32(f.d), id = dh != 0.0f ? 1.0f / dh : 0.0f;
  for (size_t s = 0; s < 8; ++s) {
    f.scales[s] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lround(scales[s] * id)), -32, 31));
    const float dl = dh * static_cast<float>(f.scales[s]);
    for (size_t j = 0; j < 32; ++j) f.levels[32 * s + j] = nearest_grid_index(dl != 0.0f ? x[32 * s + j] / dl : 0.0f);
  }
  write_iq4_xs_levels(f, out);
}

}  // namespace

bool is_legacy_or_iq4(DType type) {
  return type == DType::kQ4_1 || type == DType::kQ5_0 || type == DType::kQ5_1 || type == DType::kIQ4_NL ||
         type == DType::kIQ4_XS;
}

bool has_block_levels32(DType type) {
  return type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ5_0 || type == DType::kQ5_1 ||
         type == DType::kIQ4_NL;
}

bool has_block_min(DType type) {
  return type == DType::kQ4_1 || type == DType::kQ5_1 || type == DType::kQ4_K || type == DType::kQ5_K;
}

BlockLevels32 read_block_levels32(DType type, const std::byte* row, size_t b) {
  BlockLevels32 f;
  const auto read = [&f](const auto& x) {
    f.d = x.d;
    read_nibbles(x.qs, f.levels);
  };
  switch (type) {
    case DType::kQ4_0: read(block_at<BlockQ4_0>(row, b)); break;
    case DType::kIQ4_NL: read(block_at<BlockIQ4_NL>(row, b)); break;
    case DType::kQ4_1:
      read(block_at<BlockQ4_1>(row, b));
      f.m = block_at<BlockQ4_1>(row, b).m;
      break;
    case DType::kQ5_0:
      read(block_at<BlockQ5_0>(row, b));
      read_fifth_bits(block_at<BlockQ5_0>(row, b).qh, f.levels);
      break;
    case DType::kQ5_1:
      read(block_at<BlockQ5_1>(row, b));
      f.m = block_at<BlockQ5_1>(row, b).m;
      read_fifth_bits(block_at<BlockQ5_1>(row, b).qh, f.levels);
      break;
    default: KVS_ASSERT(false, "read_block_levels32: {} has no 32-value blocks of levels", dtype_name(type));
  }
  return f;
}

void write_block_levels32(DType type, const BlockLevels32& f, std::byte* row, size_t b) {
  const auto write = [&f](auto& x) {
    x.d = f.d;
    write_nibbles(f.levels, x.qs);
  };
  switch (type) {
    case DType::kQ4_0: write(block_at<BlockQ4_0>(row, b)); break;
    case DType::kIQ4_NL: write(block_at<BlockIQ4_NL>(row, b)); break;
    case DType::kQ4_1:
      write(block_at<BlockQ4_1>(row, b));
      block_at<BlockQ4_1>(row, b).m = f.m;
      break;
    case DType::kQ5_0:
      write(block_at<BlockQ5_0>(row, b));
      write_fifth_bits(f.levels, block_at<BlockQ5_0>(row, b).qh);
      break;
    case DType::kQ5_1:
      write(block_at<BlockQ5_1>(row, b));
      block_at<BlockQ5_1>(row, b).m = f.m;
      write_fifth_bits(f.levels, block_at<BlockQ5_1>(row, b).qh);
      break;
    default: KVS_ASSERT(false, "write_block_levels32: {} has no 32-value blocks of levels", dtype_name(type));
  }
}

Iq4XsLevels read_iq4_xs_levels(const std::byte* block) {
  const auto& x = block_at<BlockIQ4_XS>(block, 0);
  Iq4XsLevels f;
  f.d = x.d;
  for (size_t j = 0; j < 8; ++j) {
    const int ls = ((x.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((x.scales_h >> (2 * j)) & 3) << 4);
    f.scales[j] = static_cast<int8_t>(ls - 32);
    read_nibbles(x.qs + 16 * j, f.levels + 32 * j);
  }
  return f;
}

void write_iq4_xs_levels(const Iq4XsLevels& f, std::byte* block) {
  auto& x = block_at<BlockIQ4_XS>(block, 0);
  x.d = f.d;
  x.scales_h = 0;
  std::memset(x.scales_l, 0, sizeof x.scales_l);
  for (size_t j = 0; j < 8; ++j) {
    const int ls = f.scales[j] + 32;
    x.scales_l[j / 2] = static_cast<uint8_t>(x.scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
    x.scales_h = static_cast<uint16_t>(x.scales_h | ((ls >> 4) << (2 * j)));
    write_nibbles(f.levels + 32 * j, x.qs + 16 * j);
  }
}

BlockInts32 block_ints32(DType type, const std::byte* row, size_t b) {
  BlockInts32 out;
  if (type == DType::kIQ4_XS) {
    const Iq4XsLevels f = read_iq4_xs_levels(row + b / 8 * sizeof(BlockIQ4_XS));
    out.d = fp16_to_fp32(f.d) * static_cast<float>(f.scales[b % 8]);
    for (size_t j = 0; j < 32; ++j) out.q[j] = kIq4Grid[f.levels[32 * (b % 8) + j]];
    return out;
  }
  const BlockLevels32 f = read_block_levels32(type, row, b);
  out.d = fp16_to_fp32(f.d);
  out.m = fp16_to_fp32(f.m);
  for (size_t j = 0; j < 32; ++j) {
    const int level = f.levels[j];
    out.q[j] = static_cast<int8_t>(type == DType::kIQ4_NL ? kIq4Grid[level]
                                   : type == DType::kQ4_0 ? level - 8
                                   : type == DType::kQ5_0 ? level - 16
                                                          : level);
  }
  return out;
}

void dequantize_legacy_iq4_row(DType type, const std::byte* src, float* dst, size_t n) {
  KVS_ASSERT(is_legacy_or_iq4(type), "dequantize_legacy_iq4_row: {} is not Q4_1, Q5_0, Q5_1 or IQ4", dtype_name(type));
  // Without a min nothing is added, so a value 0 keeps its sign bit as ggml's dequantization gives it (-0 for d < 0).
  const bool min = has_block_min(type);
  for (size_t b = 0; b < n / 32; ++b) {
    const BlockInts32 x = block_ints32(type, src, b);
    for (size_t j = 0; j < 32; ++j)
      dst[32 * b + j] = min ? x.d * static_cast<float>(x.q[j]) + x.m : x.d * static_cast<float>(x.q[j]);
  }
}

void quantize_legacy_iq4_row(DType type, const float* src, std::byte* dst, size_t n) {
  if (type == DType::kIQ4_XS) {
    for (size_t b = 0; b < n / 256; ++b) quantize_iq4_xs(src + 256 * b, dst + b * sizeof(BlockIQ4_XS));
    return;
  }
  KVS_ASSERT(is_legacy_or_iq4(type), "quantize_legacy_iq4_row: {} is not Q4_1, Q5_0, Q5_1 or IQ4", dtype_name(type));
  for (size_t b = 0; b < n / 32; ++b) {
    const float* x = src + 32 * b;
    BlockLevels32 f;
    if (type == DType::kQ4_1 || type == DType::kQ5_1) {
      f = quantize_affine(x, type == DType::kQ4_1 ? 15 : 31);
    } else if (type == DType::kQ5_0) {
      // d = (the value of largest magnitude) / -16: it lands on level 0, the others within [-16, 15].
      float amax = 0.0f, max = 0.0f;
      for (size_t j = 0; j < 32; ++j) {
        if (std::fabs(x[j]) > amax) {
          amax = std::fabs(x[j]);
          max = x[j];
        }
      }
      const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      f.d = fp32_to_fp16(d);
      for (size_t j = 0; j < 32; ++j)
        f.levels[j] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround(x[j] * id)) + 16, 0, 31));
    } else {
      f.d = fp32_to_fp16(best_grid_scale(x, 32, f.levels));
    }
    write_block_levels32(type, f, dst, b);
  }
}

}  // namespace kvs
