// AVX-512 VNNI matmul for Q8_0 and Q4_0 weights with int8 block activations (QuantizedActivations).
// Needs AVX512_VNNI (cpu_has_avx512_vnni()).
//
// vpdpbusd multiplies unsigned by signed bytes, so each weight block is fed as u = w + k (k = 128 for
// Q8_0: w xor 0x80; k = 8 for Q4_0: the raw nibble) against the signed activations a, and the offset is
// removed exactly in the integer domain: each int32 lane starts from -k * (sum of its 4 activations),
// itself a vpdpbusd of the constant k with a (once per token, reused by all rows of the tile). So every
// lane ends as the exact partial dot product of its 4 weights and activations.
// One zmm holds two blocks; its 16 int32 lanes hold 8 partial sums per block, which are converted to
// fp32 and scaled by d_w * d_a of their block before the fp32 accumulation.
#include <cstring>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx512;

// Lanes 0-7 take element 0, lanes 8-15 element 1.
KVS_ALWAYS_INLINE __m512i halves_index() { return _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1); }

KVS_ALWAYS_INLINE uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The fp16 scales of blocks at p0 and p1, broadcast to the halves.
KVS_ALWAYS_INLINE __m512 scale_pair(const std::byte* p0, const std::byte* p1) {
  const uint32_t both = load_u16(p0) | (uint32_t{load_u16(p1)} << 16);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(both)));
  return _mm512_permutexvar_ps(halves_index(), _mm512_castps128_ps512(f));
}

struct Q8Weights {
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr char kOffset = char(128);
  // Blocks b and b + 1 (block pointer p) as 64 bytes of w + 128.
  static KVS_ALWAYS_INLINE __m512i pair(const std::byte* p) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kBlockBytes + 2));
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(-128));
  }
  // One block in the low 32 bytes (the high half is don't-care: the activations there are zero).
  static KVS_ALWAYS_INLINE __m512i single(const std::byte* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    return _mm512_castsi256_si512(_mm256_xor_si256(v, _mm256_set1_epi8(-128)));
  }
};

struct Q4Weights {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr char kOffset = 8;
  // Nibbles of blocks b and b + 1: [lo(b), hi(b), lo(b + 1), hi(b + 1)], 16 bytes each.
  static KVS_ALWAYS_INLINE __m512i pair(const std::byte* p) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kBlockBytes + 2));
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    const __m512i dup =
        _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(both));
    const __m512i shifted = _mm512_srlv_epi64(dup, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
  }
  static KVS_ALWAYS_INLINE __m512i single(const std::byte* p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m256i v =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(q, m)), _mm_and_si128(_mm_srli_epi16(q, 4), m), 1);
    return _mm512_castsi256_si512(v);
  }
};

// Per int32 lane: -k * (sum of the lane's 4 activation bytes).
template <class W>
KVS_ALWAYS_INLINE __m512i offset_correction(__m512i a) {
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(W::kOffset), a));
}

// The activation scales of blocks tb and tb + 1, broadcast to the halves.
KVS_ALWAYS_INLINE __m512 act_scale_pair(const float* scales) {
  const __m128 two = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));  // unaligned
  return _mm512_permutexvar_ps(halves_index(), _mm512_castps128_ps512(two));
}

// Decode streams one row at a time: a single sequential stream is what the hardware prefetchers follow best
// (4 or 8 interleaved row streams, or streams from several places of one row, reached 30-60% of the read
// bandwidth, Zen 5). The activation side of a step is recomputed for every tile, so per row in decode:
// preparing it once per call (128 bytes per block pair) was slower, its loads competing with the weight
// stream for L1.
template <class W>
struct QuantKernel {
  using Vec = __m512;
  static constexpr size_t kStep = 64;  // a block pair
  static constexpr size_t kStripe = 1;
  static constexpr size_t kChains = 2;
  static constexpr size_t kMaxRegisterChains = 16;
  static constexpr size_t kSegment = 2048;
  static constexpr size_t kRowTile = 4;
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kMaxTokens = 4;    // 4 x 4 accumulators + 4 x (weights, scales) of 32 registers
  static constexpr size_t kColChunk = 2048;  // 4 tokens x 2 KiB of int8 activations stay in L1

  const MatmulOperands& op;
  size_t row_stride;  // bytes
  const int8_t* qs;
  const float* scales;

  template <size_t R, size_t T>
  struct Pointers {
    const std::byte* w[R];
    const int8_t* a[T];  // the token's int8 activations
    const float* d[T];   // and its block scales
  };
  template <size_t R, size_t T>
  Pointers<R, T> pointers(size_t r0, size_t t0) const {
    Pointers<R, T> p;
    for (size_t i = 0; i < R; ++i) p.w[i] = op.w.data + (r0 + i) * row_stride;
    for (size_t j = 0; j < T; ++j) {
      p.a[j] = qs + (t0 + j) * op.w.cols;
      p.d[j] = scales + (t0 + j) * (op.w.cols / 32);
    }
    return p;
  }

  // Blocks 2n and 2n + 1.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const size_t b = 2 * n, c = n * kStep;
    __m512i wu[R];
    __m512 dw[R];
#pragma GCC unroll 8
    for (size_t i = 0; i < R; ++i) {
      const std::byte* q = p.w[i] + b * W::kBlockBytes;
      wu[i] = W::pair(q);
      dw[i] = scale_pair(q, q + W::kBlockBytes);
    }
#pragma GCC unroll 8
    for (size_t j = 0; j < T; ++j) {
      const __m512i a = _mm512_loadu_si512(p.a[j] + c);
      const __m512 da = act_scale_pair(p.d[j] + b);
      const __m512i bias = offset_correction<W>(a);
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) {
        const __m512i d = _mm512_dpbusd_epi32(bias, wu[i], a);
        acc[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(dw[i], da), acc[j][i]);
      }
    }
  }

  // An odd last block (block 2n, the row's last): the high halves of the activations are zero.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void last_step(const Pointers<R, T>& p, size_t n, size_t /*c1*/, Vec (&acc)[T][R]) {
    const size_t b = 2 * n, c = n * kStep;
    __m512i wu[R];
    float dw[R];
    for (size_t i = 0; i < R; ++i) {
      const std::byte* q = p.w[i] + b * W::kBlockBytes;
      wu[i] = W::single(q);
      dw[i] = _cvtsh_ss(load_u16(q));
    }
    for (size_t j = 0; j < T; ++j) {
      const __m512i a = _mm512_maskz_loadu_epi64(0x0f, p.a[j] + c);
      const __m512i bias = offset_correction<W>(a);
      for (size_t i = 0; i < R; ++i) {
        const __m512i d = _mm512_dpbusd_epi32(bias, wu[i], a);
        acc[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_set1_ps(dw[i] * p.d[j][b]), acc[j][i]);
      }
    }
  }

  static KVS_ALWAYS_INLINE Vec zero() { return _mm512_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  template <size_t N>
  static KVS_ALWAYS_INLINE void reduce(const Vec* acc, float* sums) {
    reduce_sums<N>(acc, sums);
  }
};

template <class W>
void run(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const QuantizedActivations& xq = *op.xq;
  const QuantKernel<W> kernel{op, op.w.row_bytes(), xq.qs.data(), xq.scales.data()};
  tiling::run(kernel, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace

void matmul_q8_0_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<Q8Weights>(op, row_begin, row_end);
}
void matmul_q4_0_avx512(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<Q4Weights>(op, row_begin, row_end);
}

}  // namespace kvs::detail
