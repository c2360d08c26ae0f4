#include "tensor/kv_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/status.h"

namespace kvs {
namespace {

constexpr float kFp16Max = 65504.0f;

// The fp16 neighbours of h towards -inf and +inf (h finite).
uint16_t fp16_down(uint16_t h) {
  if (h == 0x0000 || h == 0x8000) return 0x8001;
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}
uint16_t fp16_up(uint16_t h) {
  if (h == 0x0000 || h == 0x8000) return 0x0001;
  return (h & 0x8000) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}

// Byte and nibble of element i of an int4 row (core/kv_rows.h: chunks of 32, element j and j + n/2 share a byte).
struct NibbleAt {
  size_t byte;
  bool high;
};
NibbleAt nibble_at(size_t width, size_t i) {
  const size_t chunk = i / kKvInt4Chunk, j = i % kKvInt4Chunk;
  const size_t n = std::min(kKvInt4Chunk, width - chunk * kKvInt4Chunk), half = n / 2;
  return {chunk * (kKvInt4Chunk / 2) + (j < half ? j : j - half), j >= half};
}

size_t row_bytes(KvDType type, size_t width) { return width * kv_dtype_bits(type) / 8; }

float pair_scale(KvQuantPair p) { return fp16_to_fp32(p.scale); }
float pair_min(KvQuantPair p) { return fp16_to_fp32(p.min); }

}  // namespace

uint32_t kv_quant_levels(KvDType type) {
  KVS_ASSERT(kv_dtype_quantized(type), "{} is not a quantized KV type", kv_dtype_name(type));
  return type == KvDType::kInt8 ? 255u : 15u;
}

KvQuantPair kv_quant_pair(float lo, float hi, uint32_t levels) {
  lo = std::clamp(lo, -kFp16Max, kFp16Max);
  hi = std::clamp(hi, lo, kFp16Max);
  uint16_t min = fp32_to_fp16(lo);
  if (fp16_to_fp32(min) > lo) min = fp16_down(min);
  const float m = fp16_to_fp32(min);
  if (hi <= m) return {.scale = 0, .min = min};
  uint16_t scale = fp32_to_fp16(std::min((hi - m) / static_cast<float>(levels), kFp16Max));
  while (m + fp16_to_fp32(scale) * static_cast<float>(levels) < hi && fp16_to_fp32(scale) < kFp16Max)
    scale = fp16_up(scale);
  return {.scale = scale, .min = min};
}

uint32_t kv_quantize(float x, KvQuantPair pair, uint32_t levels) {
  const float scale = pair_scale(pair);
  if (!(scale > 0.0f)) return 0;
  const float q = std::nearbyint((x - pair_min(pair)) / scale);
  return static_cast<uint32_t>(std::clamp(q, 0.0f, static_cast<float>(levels)));
}

uint32_t kv_get_q(KvDType type, const uint8_t* row, size_t width, size_t i) {
  if (type == KvDType::kInt8) return row[i];
  const NibbleAt at = nibble_at(width, i);
  return at.high ? row[at.byte] >> 4 : row[at.byte] & 0x0f;
}

void kv_set_q(KvDType type, uint8_t* row, size_t width, size_t i, uint32_t q) {
  if (type == KvDType::kInt8) {
    row[i] = static_cast<uint8_t>(q);
    return;
  }
  const NibbleAt at = nibble_at(width, i);
  row[at.byte] = at.high ? static_cast<uint8_t>((row[at.byte] & 0x0f) | (q << 4))
                         : static_cast<uint8_t>((row[at.byte] & 0xf0) | (q & 0x0f));
}

void quantize_row_per_token(KvDType type, const float* x, size_t width, size_t group_size, uint8_t* row,
                            uint16_t* scales) {
  KVS_ASSERT(group_size > 0 && width % group_size == 0, "groups of {} in a row of {}", group_size, width);
  const uint32_t levels = kv_quant_levels(type);
  const size_t groups = width / group_size;
  for (size_t g = 0; g < groups; ++g) {
    const float* xg = x + g * group_size;
    const auto [lo, hi] = std::minmax_element(xg, xg + group_size);
    const KvQuantPair pair = kv_quant_pair(*lo, *hi, levels);
    scales[g] = pair.scale;
    scales[groups + g] = pair.min;
    for (size_t i = 0; i < group_size; ++i)
      kv_set_q(type, row, width, g * group_size + i, kv_quantize(xg[i], pair, levels));
  }
}

void quantize_group_per_channel(KvDType type, const uint16_t* rows_f16, size_t rows, size_t width, uint8_t* data,
                                uint16_t* scales) {
  KVS_ASSERT(rows > 0, "a per-channel group of 0 rows");
  const uint32_t levels = kv_quant_levels(type);
  const size_t bytes = row_bytes(type, width);
  for (size_t c = 0; c < width; ++c) {
    float lo = fp16_to_fp32(rows_f16[c]), hi = lo;
    for (size_t r = 1; r < rows; ++r) {
      const float x = fp16_to_fp32(rows_f16[r * width + c]);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    const KvQuantPair pair = kv_quant_pair(lo, hi, levels);
    scales[c] = pair.scale;
    scales[width + c] = pair.min;
    for (size_t r = 0; r < rows; ++r)
      kv_set_q(type, data + r * bytes, width, c, kv_quantize(fp16_to_fp32(rows_f16[r * width + c]), pair, levels));
  }
}

float kv_element(const KvRows& rows, size_t width, size_t s, size_t i) {
  switch (rows.type) {
    case KvDType::kF32: return static_cast<const float*>(rows.data)[s * width + i];
    case KvDType::kF16: return fp16_to_fp32(static_cast<const uint16_t*>(rows.data)[s * width + i]);
    case KvDType::kBF16: return bf16_to_fp32(static_cast<const uint16_t*>(rows.data)[s * width + i]);
    case KvDType::kInt8:
    case KvDType::kInt4: break;
  }
  const auto* row = static_cast<const uint8_t*>(rows.data) + s * row_bytes(rows.type, width);
  const bool per_channel = rows.axis == KvScaleAxis::kPerChannel;
  const size_t set = per_channel ? width : width / rows.group_size;  // scales of a set (then as many mins)
  const uint16_t* scales = rows.scales + (per_channel ? s / rows.group_size : s) * 2 * set;
  const size_t g = per_channel ? i : i / rows.group_size;
  return fp16_to_fp32(scales[set + g]) +
         fp16_to_fp32(scales[g]) * static_cast<float>(kv_get_q(rows.type, row, width, i));
}

void hadamard_transform(float* x, size_t n) {
  KVS_ASSERT(std::has_single_bit(n), "a Hadamard transform of order {} (not a power of two)", n);
  for (size_t len = 1; len < n; len *= 2) {
    for (size_t i = 0; i < n; i += 2 * len) {
      for (size_t j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (size_t i = 0; i < n; ++i) x[i] *= norm;
}

}  // namespace kvs
