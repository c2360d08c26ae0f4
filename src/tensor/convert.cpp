#include "tensor/convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/status.h"
#include "tensor/kquant.h"
#include "tensor/legacy_iq4_quant.h"

namespace kvs {

void dequantize_row(DType type, const std::byte* src, float* dst, size_t n) {
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(src);
      for (size_t b = 0; b < n / BlockQ8_0::kElements; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (size_t j = 0; j < BlockQ8_0::kElements; ++j) dst[b * 32 + j] = d * blocks[b].qs[j];
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* blocks = reinterpret_cast<const BlockQ4_0*>(src);
      for (size_t b = 0; b < n / BlockQ4_0::kElements; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (size_t j = 0; j < 16; ++j) {
          dst[b * 32 + j] = d * (static_cast<int>(blocks[b].qs[j] & 0x0f) - 8);
          dst[b * 32 + j + 16] = d * (static_cast<int>(blocks[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: dequantize_k_row(type, src, dst, n); return;
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: dequantize_legacy_iq4_row(type, src, dst, n); return;
  }
  KVS_ASSERT(false, "dequantize_row: unknown dtype {}", static_cast<uint32_t>(type));
}

void quantize_row(DType type, const float* src, std::byte* dst, size_t n) {
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::kQ8_0: {
      // Same rule as ggml: d = max|x| / 127, q = round(x / d).
      auto* blocks = reinterpret_cast<BlockQ8_0*>(dst);
      for (size_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        float amax = 0.0f;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = fp32_to_fp16(d);
        for (size_t j = 0; j < 32; ++j) blocks[b].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
      }
      return;
    }
    case DType::kQ4_0: {
      // Same rule as ggml: d = (value of largest magnitude) / -8, nibble = clamp(x/d + 8.5, 0, 15).
      auto* blocks = reinterpret_cast<BlockQ4_0*>(dst);
      for (size_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        float amax = 0.0f, max = 0.0f;
        for (size_t j = 0; j < 32; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = fp32_to_fp16(d);
        for (size_t j = 0; j < 16; ++j) {
          const auto lo = static_cast<uint8_t>(std::min(15.0f, x[j] * id + 8.5f));
          const auto hi = static_cast<uint8_t>(std::min(15.0f, x[j + 16] * id + 8.5f));
          blocks[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
      return;
    }
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: quantize_k_row(type, src, dst, n); return;
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: quantize_legacy_iq4_row(type, src, dst, n); return;
  }
  KVS_ASSERT(false, "quantize_row: unknown dtype {}", static_cast<uint32_t>(type));
}

}  // namespace kvs
