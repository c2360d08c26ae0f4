#include "tensor/kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "core/status.h"

namespace kvs {
namespace {

template <class Block>
const Block& block_at(const std::byte* p) {
  return *reinterpret_cast<const Block*>(p);
}

// ---- decoding (the format definitions) ----

KBlockInts decode_q4_q5(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, uint16_t d, uint16_t dmin) {
  KBlockInts b;
  b.d = fp16_to_fp32(d);
  b.dmin = fp16_to_fp32(dmin);
  uint8_t sc[8], m[8];
  unpack_k_scales(scales, sc, m);
  for (size_t j = 0; j < 8; ++j) {
    b.scale[2 * j] = b.scale[2 * j + 1] = sc[j];
    b.min[2 * j] = b.min[2 * j + 1] = m[j];
  }
  for (size_t g = 0; g < 4; ++g) {  // sub-blocks 2g (low nibbles) and 2g + 1 (high nibbles)
    for (size_t l = 0; l < 32; ++l) {
      const uint8_t byte = qs[32 * g + l];
      int lo = byte & 15, hi = byte >> 4;
      if (qh) {
        lo |= ((qh[l] >> (2 * g)) & 1) << 4;
        hi |= ((qh[l] >> (2 * g + 1)) & 1) << 4;
      }
      b.q[64 * g + l] = static_cast<int8_t>(lo);
      b.q[64 * g + 32 + l] = static_cast<int8_t>(hi);
    }
  }
  return b;
}

KBlockInts decode_q6_k(const BlockQ6_K& x) {
  KBlockInts b;
  b.d = fp16_to_fp32(x.d);
  for (size_t g = 0; g < 16; ++g) b.scale[g] = x.scales[g];
  for (size_t h = 0; h < 2; ++h) {
    const uint8_t* ql = x.ql + 64 * h;
    const uint8_t* qh = x.qh + 32 * h;
    int8_t* q = b.q + 128 * h;
    for (size_t l = 0; l < 32; ++l) {
      q[l] = static_cast<int8_t>(((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
      q[l + 32] = static_cast<int8_t>(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
      q[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      q[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  return b;
}

KBlockInts decode_q3_k(const BlockQ3_K& x) {
  KBlockInts b;
  b.d = fp16_to_fp32(x.d);
  uint8_t raw[16];
  unpack_q3_k_scales(x.scales, raw);
  for (size_t g = 0; g < 16; ++g) b.scale[g] = static_cast<int16_t>(raw[g] - 32);
  for (size_t h = 0; h < 2; ++h) {
    for (size_t j = 0; j < 4; ++j) {
      for (size_t l = 0; l < 32; ++l) {
        const int low = (x.qs[32 * h + l] >> (2 * j)) & 3;
        const bool high = (x.hmask[l] >> (4 * h + j)) & 1;
        b.q[128 * h + 32 * j + l] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
    }
  }
  return b;
}

KBlockInts decode_q2_k(const BlockQ2_K& x) {
  KBlockInts b;
  b.d = fp16_to_fp32(x.d);
  b.dmin = fp16_to_fp32(x.dmin);
  for (size_t g = 0; g < 16; ++g) {
    b.scale[g] = x.scales[g] & 15;
    b.min[g] = x.scales[g] >> 4;
  }
  for (size_t h = 0; h < 2; ++h) {
    for (size_t j = 0; j < 4; ++j) {
      for (size_t l = 0; l < 32; ++l)
        b.q[128 * h + 32 * j + l] = static_cast<int8_t>((x.qs[32 * h + l] >> (2 * j)) & 3);
    }
  }
  return b;
}

// ---- fitting a sub-block ----

int nearest(float v) { return static_cast<int>(std::lrintf(v)); }

// x ~ scale * q - min with q in [0, nmax], min >= 0: q from a few grids spanning [min(x, 0), max(x)], then scale
// and min refitted by least squares for those q; the fit with the smallest squared error.
void fit_affine(const float* x, size_t n, int nmax, float& scale, float& min) {
  float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  lo = std::min(lo, 0.0f);
  scale = 0.0f;
  min = -lo;
  if (!(hi > lo)) return;
  double best = std::numeric_limits<double>::infinity();
  for (int k = -10; k <= 10; ++k) {
    const float iscale = (static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / (hi - lo);
    double sq = 0, sx = 0, sqq = 0, sqx = 0;
    int q[kSuperBlock];
    for (size_t i = 0; i < n; ++i) {
      q[i] = std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax);
      sq += q[i];
      sx += x[i];
      sqq += static_cast<double>(q[i]) * q[i];
      sqx += q[i] * static_cast<double>(x[i]);
    }
    const double det = static_cast<double>(n) * sqq - sq * sq;
    if (!(det > 0.0)) continue;
    double s = (static_cast<double>(n) * sqx - sq * sx) / det, b = (sx - s * sq) / static_cast<double>(n);
    if (b > 0.0) {  // the offset would be a negative min: fit the scale alone
      b = 0.0;
      s = sqx / sqq;
    }
    if (!(s > 0.0)) continue;
    double err = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double e = s * q[i] + b - x[i];
      err += e * e;
    }
    if (err < best) {
      best = err;
      scale = static_cast<float>(s);
      min = static_cast<float>(-b);
    }
  }
}

// x ~ scale * q with q in [-nmax, nmax - 1]: grids around the value of largest magnitude mapping to -nmax, the
// scale refitted by least squares; the best.
float fit_symmetric(const float* x, size_t n, int nmax) {
  float vmax = 0.0f;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(vmax)) vmax = x[i];
  if (vmax == 0.0f) return 0.0f;
  double best = std::numeric_limits<double>::infinity();
  float scale = -vmax / static_cast<float>(nmax);
  for (int k = -9; k <= 9; ++k) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / vmax;
    double sqq = 0, sqx = 0;
    int q[kSuperBlock];
    for (size_t i = 0; i < n; ++i) {
      q[i] = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
      sqq += static_cast<double>(q[i]) * q[i];
      sqx += q[i] * static_cast<double>(x[i]);
    }
    if (!(sqq > 0.0)) continue;
    const double s = sqx / sqq;
    double err = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double e = s * q[i] - x[i];
      err += e * e;
    }
    if (err < best) {
      best = err;
      scale = static_cast<float>(s);
    }
  }
  return scale;
}

// Sub-blocks of `sub` values with a scale and a min (q in [0, nmax]; scales and mins in [0, scale_max]).
KBlockInts choose_affine(const float* x, size_t sub, int nmax, int scale_max) {
  const size_t subs = kSuperBlock / sub;
  float scales[16], mins[16];
  for (size_t j = 0; j < subs; ++j) fit_affine(x + j * sub, sub, nmax, scales[j], mins[j]);
  const float max_scale = *std::max_element(scales, scales + subs), max_min = *std::max_element(mins, mins + subs);
  KBlockInts b;
  b.d = fp16_to_fp32(fp32_to_fp16(max_scale / static_cast<float>(scale_max)));
  b.dmin = fp16_to_fp32(fp32_to_fp16(max_min / static_cast<float>(scale_max)));
  for (size_t j = 0; j < subs; ++j) {
    const int sc = b.d > 0.0f ? std::clamp(nearest(scales[j] / b.d), 0, scale_max) : 0;
    const int m = b.dmin > 0.0f ? std::clamp(nearest(mins[j] / b.dmin), 0, scale_max) : 0;
    const float step = b.d * static_cast<float>(sc), offset = b.dmin * static_cast<float>(m);
    for (size_t g = j * sub / 16; g < (j + 1) * sub / 16; ++g) {
      b.scale[g] = static_cast<int16_t>(sc);
      b.min[g] = static_cast<int16_t>(m);
    }
    for (size_t i = j * sub; i < (j + 1) * sub; ++i) {
      b.q[i] = static_cast<int8_t>(step > 0.0f ? std::clamp(nearest((x[i] + offset) / step), 0, nmax) : 0);
    }
  }
  return b;
}

// Sub-blocks of 16 with a signed scale each (q in [-nmax, nmax - 1]), scales of [-scale_max, scale_max].
KBlockInts choose_symmetric(const float* x, int nmax, int scale_lo, int scale_max) {
  float scales[16];
  float amax = 0.0f;
  for (size_t g = 0; g < 16; ++g) {
    scales[g] = fit_symmetric(x + 16 * g, 16, nmax);
    amax = std::max(amax, std::fabs(scales[g]));
  }
  KBlockInts b;
  b.d = fp16_to_fp32(fp32_to_fp16(amax / static_cast<float>(scale_max)));
  for (size_t g = 0; g < 16; ++g) {
    const int sc = b.d > 0.0f ? std::clamp(nearest(scales[g] / b.d), scale_lo, scale_max) : 0;
    b.scale[g] = static_cast<int16_t>(sc);
    const float step = b.d * static_cast<float>(sc);
    for (size_t i = 16 * g; i < 16 * (g + 1); ++i) {
      b.q[i] = static_cast<int8_t>(step != 0.0f ? std::clamp(nearest(x[i] / step), -nmax, nmax - 1) : 0);
    }
  }
  return b;
}

// ---- encoding ----

void pack_k_scales(const KBlockInts& b, uint8_t* p) {
  uint8_t sc[8], m[8];
  for (size_t j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(b.scale[2 * j]);
    m[j] = static_cast<uint8_t>(b.min[2 * j]);
  }
  kvs::pack_k_scales(sc, m, p);
}

void encode_q4_q5(const KBlockInts& b, uint8_t* scales, uint8_t* qs, uint8_t* qh, uint16_t& d, uint16_t& dmin) {
  d = fp32_to_fp16(b.d);
  dmin = fp32_to_fp16(b.dmin);
  pack_k_scales(b, scales);
  if (qh) std::memset(qh, 0, 32);
  for (size_t g = 0; g < 4; ++g) {
    for (size_t l = 0; l < 32; ++l) {
      const int lo = b.q[64 * g + l], hi = b.q[64 * g + 32 + l];
      qs[32 * g + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
      if (qh) qh[l] = static_cast<uint8_t>(qh[l] | ((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
    }
  }
}

void encode_q6_k(const KBlockInts& b, BlockQ6_K& x) {
  x.d = fp32_to_fp16(b.d);
  for (size_t g = 0; g < 16; ++g) x.scales[g] = static_cast<int8_t>(b.scale[g]);
  for (size_t h = 0; h < 2; ++h) {
    const int8_t* q = b.q + 128 * h;
    for (size_t l = 0; l < 32; ++l) {
      const int v0 = q[l] + 32, v1 = q[l + 32] + 32, v2 = q[l + 64] + 32, v3 = q[l + 96] + 32;
      x.ql[64 * h + l] = static_cast<uint8_t>((v0 & 15) | ((v2 & 15) << 4));
      x.ql[64 * h + l + 32] = static_cast<uint8_t>((v1 & 15) | ((v3 & 15) << 4));
      x.qh[32 * h + l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) | ((v3 >> 4) << 6));
    }
  }
}

void encode_q3_k(const KBlockInts& b, BlockQ3_K& x) {
  x.d = fp32_to_fp16(b.d);
  uint8_t raw[16];
  for (size_t g = 0; g < 16; ++g) raw[g] = static_cast<uint8_t>(b.scale[g] + 32);
  for (size_t k = 0; k < 4; ++k) {
    x.scales[k] = static_cast<uint8_t>((raw[k] & 15) | ((raw[8 + k] & 15) << 4));
    x.scales[4 + k] = static_cast<uint8_t>((raw[4 + k] & 15) | ((raw[12 + k] & 15) << 4));
    x.scales[8 + k] = static_cast<uint8_t>((raw[k] >> 4) | ((raw[4 + k] >> 4) << 2) | ((raw[8 + k] >> 4) << 4) |
                                           ((raw[12 + k] >> 4) << 6));
  }
  std::memset(x.qs, 0, sizeof x.qs);
  std::memset(x.hmask, 0, sizeof x.hmask);
  for (size_t h = 0; h < 2; ++h) {
    for (size_t j = 0; j < 4; ++j) {
      for (size_t l = 0; l < 32; ++l) {
        const int v = b.q[128 * h + 32 * j + l] + 4;  // 0..7
        x.qs[32 * h + l] = static_cast<uint8_t>(x.qs[32 * h + l] | ((v & 3) << (2 * j)));
        x.hmask[l] = static_cast<uint8_t>(x.hmask[l] | ((v >> 2) << (4 * h + j)));
      }
    }
  }
}

void encode_q2_k(const KBlockInts& b, BlockQ2_K& x) {
  x.d = fp32_to_fp16(b.d);
  x.dmin = fp32_to_fp16(b.dmin);
  for (size_t g = 0; g < 16; ++g) x.scales[g] = static_cast<uint8_t>(b.scale[g] | (b.min[g] << 4));
  std::memset(x.qs, 0, sizeof x.qs);
  for (size_t h = 0; h < 2; ++h) {
    for (size_t j = 0; j < 4; ++j) {
      for (size_t l = 0; l < 32; ++l) {
        x.qs[32 * h + l] = static_cast<uint8_t>(x.qs[32 * h + l] | (b.q[128 * h + 32 * j + l] << (2 * j)));
      }
    }
  }
}

}  // namespace

void pack_k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t* p) {
  for (size_t j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

void unpack_k_scales(const uint8_t* p, uint8_t sc[8], uint8_t m[8]) {
  for (size_t j = 0; j < 8; ++j) {
    int s = 0, n = 0;
    k_scale_min(p, j, s, n);
    sc[j] = static_cast<uint8_t>(s);
    m[j] = static_cast<uint8_t>(n);
  }
}

void unpack_q3_k_scales(const uint8_t* s, uint8_t raw[16]) {
  for (size_t g = 0; g < 16; ++g) raw[g] = static_cast<uint8_t>(q3_k_raw_scale(s, g));
}

KBlockInts decode_k_block(DType type, const std::byte* p) {
  switch (type) {
    case DType::kQ4_K: {
      const auto& x = block_at<BlockQ4_K>(p);
      return decode_q4_q5(x.scales, x.qs, nullptr, x.d, x.dmin);
    }
    case DType::kQ5_K: {
      const auto& x = block_at<BlockQ5_K>(p);
      return decode_q4_q5(x.scales, x.qs, x.qh, x.d, x.dmin);
    }
    case DType::kQ6_K: return decode_q6_k(block_at<BlockQ6_K>(p));
    case DType::kQ3_K: return decode_q3_k(block_at<BlockQ3_K>(p));
    case DType::kQ2_K: return decode_q2_k(block_at<BlockQ2_K>(p));
    default: break;
  }
  KVS_ASSERT(false, "decode_k_block: {} is not a K-quant", dtype_name(type));
  return {};
}

void dequantize_k_row(DType type, const std::byte* src, float* dst, size_t n) {
  const size_t bytes = dtype_block_bytes(type);
  for (size_t blk = 0; blk < n / kSuperBlock; ++blk) {
    const KBlockInts b = decode_k_block(type, src + blk * bytes);
    float* y = dst + blk * kSuperBlock;
    for (size_t g = 0; g < 16; ++g) {
      const float step = b.d * static_cast<float>(b.scale[g]), offset = b.dmin * static_cast<float>(b.min[g]);
      for (size_t i = 16 * g; i < 16 * (g + 1); ++i) y[i] = step * static_cast<float>(b.q[i]) - offset;
    }
  }
}

void quantize_k_row(DType type, const float* src, std::byte* dst, size_t n) {
  const size_t bytes = dtype_block_bytes(type);
  for (size_t blk = 0; blk < n / kSuperBlock; ++blk) {
    const float* x = src + blk * kSuperBlock;
    std::byte* out = dst + blk * bytes;
    switch (type) {
      case DType::kQ4_K: {
        auto& y = *reinterpret_cast<BlockQ4_K*>(out);
        encode_q4_q5(choose_affine(x, 32, 15, 63), y.scales, y.qs, nullptr, y.d, y.dmin);
        break;
      }
      case DType::kQ5_K: {
        auto& y = *reinterpret_cast<BlockQ5_K*>(out);
        encode_q4_q5(choose_affine(x, 32, 31, 63), y.scales, y.qs, y.qh, y.d, y.dmin);
        break;
      }
      case DType::kQ6_K: encode_q6_k(choose_symmetric(x, 32, -127, 127), *reinterpret_cast<BlockQ6_K*>(out)); break;
      case DType::kQ3_K: encode_q3_k(choose_symmetric(x, 4, -32, 31), *reinterpret_cast<BlockQ3_K*>(out)); break;
      case DType::kQ2_K: encode_q2_k(choose_affine(x, 16, 3, 15), *reinterpret_cast<BlockQ2_K*>(out)); break;
      default: KVS_ASSERT(false, "quantize_k_row: {} is not a K-quant", dtype_name(type));
    }
  }
}

}  // namespace kvs
