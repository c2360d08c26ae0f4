// K-quant super-blocks (core/dtype.h) in the form the SIMD matmul kernels multiply: for *_avx2.cpp and *_avx512.cpp
// files only (AVX2 intrinsics; internal linkage, so every kernel file compiles its own copy with its own flags).
//
// Every type is written as r - o with unsigned weight integers r (what vpmaddubsw takes) and an offset o per
// 16-value group g, so that a super-block's dot product with int8 activation blocks (scales d_a[b], group sums S_g)
// is, exactly in integers per 32-value block b = groups 2b, 2b + 1,
//   I1_b = sum_{g in b} scale_g sum_{i in g} r_i a_i            I2_b = sum_{g in b} min_g S_g
//   dot  = d sum_b d_a[b] I1_b - dmin sum_b d_a[b] I2_b
// with min_g = the format's min (Q4_K, Q5_K, Q2_K) or offset x scale_g with dmin = d (Q6_K: r = q + 32, Q3_K:
// r = q + 4). Bounds: r a pairs <= 2 x 63 x 127 (int16), |I1_b| <= 2 x 16002 x 128 and |I2_b| <= 2 x 4096 x 2032,
// both below 2^24, so their float conversions are exact.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/status.h"
#include "tensor/kquant.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

#define KVS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvs::detail {
namespace {

struct SuperBlockScales {
  __m256i scale;  // int16 [16]: group g's scale (Q4_K/Q5_K: sub-block g / 2's)
  __m256i min;    // int16 [16]: min_g above
  float d, dmin;
};

KVS_ALWAYS_INLINE float load_fp16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return _cvtsh_ss(v);
}

KVS_ALWAYS_INLINE __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
KVS_ALWAYS_INLINE __m128i load16(const void* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Bytes of `v` whose bit `bit` is set -> `value`, others 0.
KVS_ALWAYS_INLINE __m256i bit_to(__m256i v, int bit, int value) {
  const __m256i b = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, b), b), _mm256_set1_epi8(static_cast<char>(value)));
}

// Q4_K/Q5_K: the 12 packed bytes (k_scale_min's layout, four sub-blocks per 32-bit word) as 16 int16 lanes of
// scales and of mins, each sub-block's value in both of its groups.
KVS_ALWAYS_INLINE SuperBlockScales q4_k_scales(const uint8_t* packed, const void* d, const void* dmin) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  // Sub-blocks 0-3: the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); 4-7: a nibble of bytes 8-11 with the
  // top 2 bits of bytes 0-3 (scales) or 4-7 (mins) as bits 4-5.
  const uint32_t sc_lo = w[0] & 0x3f3f3f3f, sc_hi = (w[2] & 0x0f0f0f0f) | ((w[0] >> 2) & 0x30303030);
  const uint32_t m_lo = w[1] & 0x3f3f3f3f, m_hi = ((w[2] >> 4) & 0x0f0f0f0f) | ((w[1] >> 2) & 0x30303030);
  const __m128i sc = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0);
  const __m128i m = _mm_setr_epi32(static_cast<int>(m_lo), static_cast<int>(m_hi), 0, 0);
  return {_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc)), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m)), load_fp16(d),
          load_fp16(dmin)};
}

// Q4_K/Q5_K: the low 4 bits of sub-block j (32 bytes of qs hold sub-blocks 2k and 2k + 1 in their nibbles).
KVS_ALWAYS_INLINE __m256i q4_k_nibbles(const uint8_t* qs, size_t j) {
  __m256i q = load32(qs + 32 * (j / 2));
  if (j % 2) q = _mm256_srli_epi16(q, 4);
  return _mm256_and_si256(q, _mm256_set1_epi8(0x0f));
}

// Scales given per group as signed bytes, with offset o: the min-like term is o x scale, paid at rate d.
KVS_ALWAYS_INLINE SuperBlockScales offset_scales(__m128i scales8, int offset_shift, float d) {
  const __m256i scale = _mm256_cvtepi8_epi16(scales8);
  return {scale, _mm256_slli_epi16(scale, offset_shift), d, d};
}

struct Q4K {
  static KVS_ALWAYS_INLINE SuperBlockScales scales(const std::byte* blk) {
    const auto& x = *reinterpret_cast<const BlockQ4_K*>(blk);
    return q4_k_scales(x.scales, &x.d, &x.dmin);
  }
  static KVS_ALWAYS_INLINE __m256i unpack(const std::byte* blk, size_t j) {
    return q4_k_nibbles(reinterpret_cast<const BlockQ4_K*>(blk)->qs, j);
  }
};

struct Q5K {
  static KVS_ALWAYS_INLINE SuperBlockScales scales(const std::byte* blk) {
    const auto& x = *reinterpret_cast<const BlockQ5_K*>(blk);
    return q4_k_scales(x.scales, &x.d, &x.dmin);
  }
  static KVS_ALWAYS_INLINE __m256i unpack(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ5_K*>(blk);
    return _mm256_or_si256(q4_k_nibbles(x.qs, j), bit_to(load32(x.qh), static_cast<int>(j), 16));
  }
};

struct Q6K {
  static KVS_ALWAYS_INLINE SuperBlockScales scales(const std::byte* blk) {
    const auto& x = *reinterpret_cast<const BlockQ6_K*>(blk);
    return offset_scales(load16(x.scales), 5, load_fp16(&x.d));  // r = q + 32
  }
  static KVS_ALWAYS_INLINE __m256i unpack(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ6_K*>(blk);
    const size_t h = j / 4, k = j % 4;  // quarter k of half h
    __m256i low = load32(x.ql + 64 * h + 32 * (k % 2));
    if (k >= 2) low = _mm256_srli_epi16(low, 4);
    // Bits 2k..2k+1 of qh to bits 4-5.
    __m256i high = load32(x.qh + 32 * h);
    high = k == 0   ? _mm256_slli_epi16(high, 4)
           : k == 1 ? _mm256_slli_epi16(high, 2)
           : k == 2 ? high
                    : _mm256_srli_epi16(high, 2);
    return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi8(0x0f)),
                           _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
  }
};

struct Q3K {
  static KVS_ALWAYS_INLINE SuperBlockScales scales(const std::byte* blk) {
    const auto& x = *reinterpret_cast<const BlockQ3_K*>(blk);
    int8_t s[16];
    for (size_t g = 0; g < 16; ++g) s[g] = static_cast<int8_t>(q3_k_raw_scale(x.scales, g) - 32);
    return offset_scales(load16(s), 2, load_fp16(&x.d));  // r = q + 4
  }
  static KVS_ALWAYS_INLINE __m256i unpack(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ3_K*>(blk);
    const size_t h = j / 4, k = j % 4;
    const __m256i low =
        _mm256_and_si256(_mm256_srli_epi16(load32(x.qs + 32 * h), static_cast<int>(2 * k)), _mm256_set1_epi8(3));
    return _mm256_or_si256(low, bit_to(load32(x.hmask), static_cast<int>(4 * h + k), 4));
  }
};

struct Q2K {
  static KVS_ALWAYS_INLINE SuperBlockScales scales(const std::byte* blk) {
    const auto& x = *reinterpret_cast<const BlockQ2_K*>(blk);
    const __m128i packed = load16(x.scales), low4 = _mm_set1_epi8(0x0f);
    return {_mm256_cvtepu8_epi16(_mm_and_si128(packed, low4)),
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4)), load_fp16(&x.d), load_fp16(&x.dmin)};
  }
  static KVS_ALWAYS_INLINE __m256i unpack(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ2_K*>(blk);
    const size_t h = j / 4, k = j % 4;
    return _mm256_and_si256(_mm256_srli_epi16(load32(x.qs + 32 * h), static_cast<int>(2 * k)), _mm256_set1_epi8(3));
  }
};

// What a kernel step over rows r0.. and tokens t0.. reads.
template <size_t R, size_t T>
struct KQuantPointers {
  const std::byte* w[R];
  size_t block_bytes;
  const int8_t* a[T];
  const float* d[T];    // activation block scales
  const int16_t* s[T];  // activation group sums
};
template <size_t R, size_t T>
KQuantPointers<R, T> k_quant_pointers(const MatmulOperands& op, size_t r0, size_t t0) {
  KQuantPointers<R, T> p;
  p.block_bytes = dtype_block_bytes(op.w.type);
  for (size_t i = 0; i < R; ++i) p.w[i] = op.w.row(r0 + i);
  for (size_t j = 0; j < T; ++j) {
    p.a[j] = op.xq->token_qs(t0 + j);
    p.d[j] = op.xq->token_scales(t0 + j);
    p.s[j] = op.xq->token_group_sums(t0 + j);
  }
  return p;
}

// What the AVX2 and AVX-512 K-quant kernels share of matmul_tiling.h's Kernel: one super-block per step, the
// activations through KQuantPointers. Each kernel adds Vec, kMaxTokens (its register budget), step and the vector
// helpers.
struct KQuantKernelBase {
  static constexpr size_t kStep = kSuperBlock;
  static constexpr size_t kStripe = 1;
  static constexpr size_t kChains = 2;
  static constexpr size_t kMaxRegisterChains = 8;
  static constexpr size_t kSegment = 2048;
  static constexpr size_t kRowTile = 2;
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kColChunk = 2048;

  const MatmulOperands& op;

  template <size_t R, size_t T>
  using Pointers = KQuantPointers<R, T>;
  template <size_t R, size_t T>
  Pointers<R, T> pointers(size_t r0, size_t t0) const {
    return k_quant_pointers<R, T>(op, r0, t0);
  }

  // Never called: the columns are whole super-blocks.
  template <size_t R, size_t T, class Vec>
  static KVS_ALWAYS_INLINE void last_step(const Pointers<R, T>&, size_t, size_t, Vec (&)[T][R]) {}
};

// Calls f(W{}) with the unpacking struct of K-quant `type`; false when `type` is not one.
template <class F>
bool with_k_quant(DType type, const F& f) {
  switch (type) {
    case DType::kQ2_K: f(Q2K{}); return true;
    case DType::kQ3_K: f(Q3K{}); return true;
    case DType::kQ4_K: f(Q4K{}); return true;
    case DType::kQ5_K: f(Q5K{}); return true;
    case DType::kQ6_K: f(Q6K{}); return true;
    default: return false;
  }
}

// Output rows [row_begin, row_end) of a K-quant matmul through Kernel<W> for the weights' type W; `kernel_name` names
// the caller in the error for a type that is not a K-quant.
template <template <class> class Kernel>
void run_k_quant(const MatmulOperands& op, size_t row_begin, size_t row_end, const char* kernel_name) {
  const bool known = with_k_quant(op.w.type, [&](auto w) {
    const Kernel<decltype(w)> kernel{{op}};
    tiling::run(kernel, row_begin, row_end, op.n_tokens, op.w.cols);
  });
  KVS_ASSERT(known, "{}: {} is not a K-quant", kernel_name, dtype_name(op.w.type));
}

}  // namespace
}  // namespace kvs::detail
