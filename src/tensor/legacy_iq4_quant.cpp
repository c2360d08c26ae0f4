#include "tensor/legacy_iq4_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "core/status.h"

namespace kvs {
namespace {

template <typename Block>
const Block& block_at(const std::byte* p, size_t b) {
  return reinterpret_cast<const Block*>(p)[b];
}

// The 5-bit level of value j (0..31) of a block: its nibble (Q4_0's layout) and bit j of qh.
int level5(const uint8_t qs[16], const uint8_t qh[4], size_t j) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof h);
  const int nibble = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return nibble | static_cast<int>(((h >> j) & 1u) << 4);
}
int nibble(const uint8_t qs[16], size_t j) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; }

// Stores 32 levels (0..15 low, bit 4 the fifth bit) in Q4_0's nibble layout and, when qh is given, the fifth bits.
void store_levels(const uint8_t levels[32], uint8_t qs[16], uint8_t* qh) {
  uint32_t h = 0;
  for (size_t j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4));
    h |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
    h |= static_cast<uint32_t>((levels[j + 16] >> 4) & 1) << (j + 16);
  }
  if (qh) std::memcpy(qh, &h, sizeof h);
}

// The 6-bit scale of IQ4_XS sub-block j.
int iq4_xs_scale(const BlockIQ4_XS& b, size_t j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// Affine levels of 32 values for Q4_1 / Q5_1: d = (max - min) / top, level = round((x - min) / d).
void quantize_affine(const float* x, int top, uint16_t& d_out, uint16_t& m_out, uint8_t levels[32]) {
  float lo = x[0], hi = x[0];
  for (size_t j = 1; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / static_cast<float>(top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_out = fp32_to_fp16(d);
  m_out = fp32_to_fp16(lo);
  for (size_t j = 0; j < 32; ++j)
    levels[j] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround((x[j] - lo) * id)), 0, top));
}

// The grid index nearest to v (in units of the scale).
uint8_t nearest_grid_index(float v) {
  uint8_t best = 0;
  for (uint8_t i = 1; i < 16; ++i)
    if (std::fabs(v - kIq4Grid[i]) < std::fabs(v - kIq4Grid[best])) best = i;
  return best;
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

}  // namespace

bool is_legacy_or_iq4(DType type) {
  return type == DType::kQ4_1 || type == DType::kQ5_0 || type == DType::kQ5_1 || type == DType::kIQ4_NL ||
         type == DType::kIQ4_XS;
}

bool transcodes_to_q8_0(DType type) { return type == DType::kQ5_0 || type == DType::kIQ4_NL; }

void dequantize_legacy_iq4_row(DType type, const std::byte* src, float* dst, size_t n) {
  const size_t blocks = n / dtype_block_elements(type);
  for (size_t b = 0; b < blocks; ++b) {
    switch (type) {
      case DType::kQ4_1: {
        const auto& x = block_at<BlockQ4_1>(src, b);
        const float d = fp16_to_fp32(x.d), m = fp16_to_fp32(x.m);
        for (size_t j = 0; j < 32; ++j) dst[32 * b + j] = d * static_cast<float>(nibble(x.qs, j)) + m;
        break;
      }
      case DType::kQ5_0: {
        const auto& x = block_at<BlockQ5_0>(src, b);
        const float d = fp16_to_fp32(x.d);
        for (size_t j = 0; j < 32; ++j) dst[32 * b + j] = d * static_cast<float>(level5(x.qs, x.qh, j) - 16);
        break;
      }
      case DType::kQ5_1: {
        const auto& x = block_at<BlockQ5_1>(src, b);
        const float d = fp16_to_fp32(x.d), m = fp16_to_fp32(x.m);
        for (size_t j = 0; j < 32; ++j) dst[32 * b + j] = d * static_cast<float>(level5(x.qs, x.qh, j)) + m;
        break;
      }
      case DType::kIQ4_NL: {
        const auto& x = block_at<BlockIQ4_NL>(src, b);
        const float d = fp16_to_fp32(x.d);
        for (size_t j = 0; j < 32; ++j) dst[32 * b + j] = d * static_cast<float>(kIq4Grid[nibble(x.qs, j)]);
        break;
      }
      case DType::kIQ4_XS: {
        const auto& x = block_at<BlockIQ4_XS>(src, b);
        const float d = fp16_to_fp32(x.d);
        for (size_t s = 0; s < 8; ++s) {
          const float dl = d * static_cast<float>(iq4_xs_scale(x, s) - 32);
          for (size_t j = 0; j < 32; ++j)
            dst[256 * b + 32 * s + j] = dl * static_cast<float>(kIq4Grid[nibble(x.qs + 16 * s, j)]);
        }
        break;
      }
      default: KVS_ASSERT(false, "dequantize_legacy_iq4_row: {} is not Q4_1, Q5_0, Q5_1 or IQ4", dtype_name(type));
    }
  }
}

void quantize_legacy_iq4_row(DType type, const float* src, std::byte* dst, size_t n) {
  const size_t blocks = n / dtype_block_elements(type);
  uint8_t levels[256];
  for (size_t b = 0; b < blocks; ++b) {
    const float* x = src + b * dtype_block_elements(type);
    switch (type) {
      case DType::kQ4_1: {
        auto& y = reinterpret_cast<BlockQ4_1*>(dst)[b];
        quantize_affine(x, 15, y.d, y.m, levels);
        store_levels(levels, y.qs, nullptr);
        break;
      }
      case DType::kQ5_1: {
        auto& y = reinterpret_cast<BlockQ5_1*>(dst)[b];
        quantize_affine(x, 31, y.d, y.m, levels);
        store_levels(levels, y.qs, y.qh);
        break;
      }
      case DType::kQ5_0: {
        // d = (the value of largest magnitude) / -16: it lands on level 0, the others within [-16, 15].
        auto& y = reinterpret_cast<BlockQ5_0*>(dst)[b];
        float amax = 0.0f, max = 0.0f;
        for (size_t j = 0; j < 32; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y.d = fp32_to_fp16(d);
        for (size_t j = 0; j < 32; ++j)
          levels[j] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround(x[j] * id)) + 16, 0, 31));
        store_levels(levels, y.qs, y.qh);
        break;
      }
      case DType::kIQ4_NL: {
        auto& y = reinterpret_cast<BlockIQ4_NL*>(dst)[b];
        const float d = best_grid_scale(x, 32, levels);
        y.d = fp32_to_fp16(d);
        store_levels(levels, y.qs, nullptr);
        break;
      }
      case DType::kIQ4_XS: {
        // Each sub-block's best scale, then one super-block scale d with 6-bit multiples (ls - 32) of it; the
        // indices are chosen again against the scale the block will hold.
        auto& y = reinterpret_cast<BlockIQ4_XS*>(dst)[b];
        float scales[8], amax = 0.0f;
        for (size_t s = 0; s < 8; ++s) {
          scales[s] = best_grid_scale(x + 32 * s, 32, levels + 32 * s);
          if (std::fabs(scales[s]) > std::fabs(amax)) amax = scales[s];
        }
        const float d = amax / -32.0f;
        y.d = fp32_to_fp16(d);
        const float dh = fp16_to_fp32(y.d), id = dh != 0.0f ? 1.0f / dh : 0.0f;
        y.scales_h = 0;
        std::memset(y.scales_l, 0, sizeof y.scales_l);
        for (size_t s = 0; s < 8; ++s) {
          const int ls = std::clamp(static_cast<int>(std::lround(scales[s] * id)) + 32, 0, 63);
          y.scales_l[s / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (s % 2)));
          y.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * s));
          const float dl = dh * static_cast<float>(ls - 32);
          for (size_t j = 0; j < 32; ++j)
            levels[32 * s + j] = dl != 0.0f ? nearest_grid_index(x[32 * s + j] / dl) : nearest_grid_index(0.0f);
          store_levels(levels + 32 * s, y.qs + 16 * s, nullptr);
        }
        break;
      }
      default: KVS_ASSERT(false, "quantize_legacy_iq4_row: {} is not Q4_1, Q5_0, Q5_1 or IQ4", dtype_name(type));
    }
  }
}

void transcode_row_to_q8_0(DType type, const std::byte* src, BlockQ8_0* dst, size_t n) {
  KVS_ASSERT(transcodes_to_q8_0(type), "transcode_row_to_q8_0: {} does not transcode to q8_0", dtype_name(type));
  for (size_t b = 0; b < n / 32; ++b) {
    if (type == DType::kQ5_0) {
      const auto& x = block_at<BlockQ5_0>(src, b);
      dst[b].d = x.d;
      for (size_t j = 0; j < 32; ++j) dst[b].qs[j] = static_cast<int8_t>(level5(x.qs, x.qh, j) - 16);
    } else {
      const auto& x = block_at<BlockIQ4_NL>(src, b);
      dst[b].d = x.d;
      for (size_t j = 0; j < 32; ++j) dst[b].qs[j] = kIq4Grid[nibble(x.qs, j)];
    }
  }
}

}  // namespace kvs
