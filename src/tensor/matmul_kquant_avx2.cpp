// AVX2 matmul for K-quant weights (Q2_K..Q6_K, core/dtype.h) with int8 block activations (QuantizedActivations),
// one 32-value activation block per step. Each step unpacks the 32 weight integers of that part of the super-block
// as unsigned bytes r (Q4_K/Q5_K/Q2_K: q itself; Q6_K/Q3_K: q + 32 / q + 4), and their 16-value groups' scales
// and mins as int16 lanes; then for every token, exactly in integers,
//   I1 = sum_g scale_g sum_{i in g} q_i a_i = madd(maddubs(r, a) - offset * maddubs(1, a), scale16)
//   I2 = sum_g min_g sum_{i in g} a_i        = madd(maddubs(1, a), min16)
// (maddubs pairs stay within int16: 2 x 63 x 127 + 32 x 256 < 2^15), and in fp32
//   acc += float(I1) * (d * d_a) - float(I2) * (dmin * d_a),
// the scalar reference's arithmetic (matmul.cpp) up to the order of the fp32 sums.
#include <cstring>

#include "core/dtype.h"
#include "core/status.h"
#include "tensor/kquant.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx2;

KVS_ALWAYS_INLINE float load_fp16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return _cvtsh_ss(v);
}

KVS_ALWAYS_INLINE __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Lanes 0-7 = lo, 8-15 = hi.
KVS_ALWAYS_INLINE __m256i pair16(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)), _mm_set1_epi16(static_cast<int16_t>(lo)));
}

// Bytes of `v` whose bit `bit` is set -> `value`, others 0.
KVS_ALWAYS_INLINE __m256i bit_to(__m256i v, int bit, int value) {
  const __m256i b = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, b), b), _mm256_set1_epi8(static_cast<char>(value)));
}

// The 32 weights of sub-block j (j < 8) of one super-block.
struct BlockPart {
  __m256i r;      // unsigned integers
  __m256i scale;  // int16: lanes 0-7 the scale of group 2j, 8-15 of group 2j + 1
  __m256i min;    // int16, likewise (types with a min)
  float d, dmin;
};

struct Q4K {
  static constexpr int kOffsetShift = -1;  // r = q
  static constexpr bool kHasMin = true;
  static KVS_ALWAYS_INLINE BlockPart load(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ4_K*>(blk);
    __m256i q = load32(x.qs + 32 * (j / 2));
    if (j % 2) q = _mm256_srli_epi16(q, 4);
    int sc, m;
    k_scale_min(x.scales, j, sc, m);
    return {_mm256_and_si256(q, _mm256_set1_epi8(0x0f)), _mm256_set1_epi16(static_cast<int16_t>(sc)),
            _mm256_set1_epi16(static_cast<int16_t>(m)), load_fp16(&x.d), load_fp16(&x.dmin)};
  }
};

struct Q5K {
  static constexpr int kOffsetShift = -1;  // r = q
  static constexpr bool kHasMin = true;
  static KVS_ALWAYS_INLINE BlockPart load(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ5_K*>(blk);
    __m256i q = load32(x.qs + 32 * (j / 2));
    if (j % 2) q = _mm256_srli_epi16(q, 4);
    q = _mm256_or_si256(_mm256_and_si256(q, _mm256_set1_epi8(0x0f)), bit_to(load32(x.qh), static_cast<int>(j), 16));
    int sc, m;
    k_scale_min(x.scales, j, sc, m);
    return {q, _mm256_set1_epi16(static_cast<int16_t>(sc)), _mm256_set1_epi16(static_cast<int16_t>(m)), load_fp16(&x.d),
            load_fp16(&x.dmin)};
  }
};

struct Q6K {
  static constexpr int kOffsetShift = 5;  // r = q + 32
  static constexpr bool kHasMin = false;
  static KVS_ALWAYS_INLINE BlockPart load(const std::byte* blk, size_t j) {
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
    const __m256i r =
        _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi8(0x0f)), _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
    return {r, pair16(x.scales[2 * j], x.scales[2 * j + 1]), _mm256_setzero_si256(), load_fp16(&x.d), 0.0f};
  }
};

struct Q3K {
  static constexpr int kOffsetShift = 2;  // r = q + 4
  static constexpr bool kHasMin = false;
  static KVS_ALWAYS_INLINE BlockPart load(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ3_K*>(blk);
    const size_t h = j / 4, k = j % 4;
    const __m256i low =
        _mm256_and_si256(_mm256_srli_epi16(load32(x.qs + 32 * h), static_cast<int>(2 * k)), _mm256_set1_epi8(3));
    const __m256i r = _mm256_or_si256(low, bit_to(load32(x.hmask), static_cast<int>(4 * h + k), 4));
    return {r, pair16(q3_k_raw_scale(x.scales, 2 * j) - 32, q3_k_raw_scale(x.scales, 2 * j + 1) - 32),
            _mm256_setzero_si256(), load_fp16(&x.d), 0.0f};
  }
};

struct Q2K {
  static constexpr int kOffsetShift = -1;  // r = q
  static constexpr bool kHasMin = true;
  static KVS_ALWAYS_INLINE BlockPart load(const std::byte* blk, size_t j) {
    const auto& x = *reinterpret_cast<const BlockQ2_K*>(blk);
    const size_t h = j / 4, k = j % 4;
    const __m256i r =
        _mm256_and_si256(_mm256_srli_epi16(load32(x.qs + 32 * h), static_cast<int>(2 * k)), _mm256_set1_epi8(3));
    const uint8_t s0 = x.scales[2 * j], s1 = x.scales[2 * j + 1];
    return {r, pair16(s0 & 15, s1 & 15), pair16(s0 >> 4, s1 >> 4), load_fp16(&x.d), load_fp16(&x.dmin)};
  }
};

template <class W>
struct KQuantKernel {
  using Vec = __m256;
  static constexpr size_t kStep = 32;   // one activation block
  static constexpr size_t kStripe = 8;  // one super-block
  static constexpr size_t kChains = 2;
  static constexpr size_t kMaxRegisterChains = 8;
  static constexpr size_t kSegment = 2048;
  static constexpr size_t kRowTile = 2;
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kMaxTokens = 3;
  static constexpr size_t kColChunk = 2048;

  const MatmulOperands& op;
  size_t row_stride;  // bytes
  size_t block_bytes;
  const int8_t* qs;
  const float* scales;

  template <size_t R, size_t T>
  struct Pointers {
    const std::byte* w[R];
    size_t block_bytes;
    const int8_t* a[T];
    const float* d[T];
  };
  template <size_t R, size_t T>
  Pointers<R, T> pointers(size_t r0, size_t t0) const {
    Pointers<R, T> p;
    p.block_bytes = block_bytes;
    for (size_t i = 0; i < R; ++i) p.w[i] = op.w.data + (r0 + i) * row_stride;
    for (size_t j = 0; j < T; ++j) {
      p.a[j] = qs + (t0 + j) * op.w.cols;
      p.d[j] = scales + (t0 + j) * (op.w.cols / 32);
    }
    return p;
  }

  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const size_t sb = n / 8, j = n % 8;
    BlockPart w[R];
#pragma GCC unroll 8
    for (size_t i = 0; i < R; ++i) w[i] = W::load(p.w[i] + sb * p.block_bytes, j);
    const __m256i ones8 = _mm256_set1_epi8(1);
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.a[t] + n * kStep));
      const float da = p.d[t][n];
      __m256i sums = _mm256_setzero_si256();  // pair sums of a
      if constexpr (W::kOffsetShift >= 0 || W::kHasMin) sums = _mm256_maddubs_epi16(ones8, a);
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) {
        __m256i p16 = _mm256_maddubs_epi16(w[i].r, a);
        if constexpr (W::kOffsetShift >= 0) p16 = _mm256_sub_epi16(p16, _mm256_slli_epi16(sums, W::kOffsetShift));
        const __m256 i1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, w[i].scale));
        acc[t][i] = _mm256_fmadd_ps(i1, _mm256_set1_ps(w[i].d * da), acc[t][i]);
        if constexpr (W::kHasMin) {
          const __m256 i2 = _mm256_cvtepi32_ps(_mm256_madd_epi16(sums, w[i].min));
          acc[t][i] = _mm256_fnmadd_ps(i2, _mm256_set1_ps(w[i].dmin * da), acc[t][i]);
        }
      }
    }
  }

  // Never called: the columns are whole super-blocks.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void last_step(const Pointers<R, T>&, size_t, size_t, Vec (&)[T][R]) {}

  static KVS_ALWAYS_INLINE Vec zero() { return _mm256_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  template <size_t N>
  static KVS_ALWAYS_INLINE void reduce(const Vec* acc, float* sums) {
    reduce_sums<N>(acc, sums);
  }
};

template <class W>
void run(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const QuantizedActivations& xq = *op.xq;
  const KQuantKernel<W> kernel{op, op.w.row_bytes(), dtype_block_bytes(op.w.type), xq.qs.data(), xq.scales.data()};
  tiling::run(kernel, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace

void matmul_kquant_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  switch (op.w.type) {
    case DType::kQ2_K: run<Q2K>(op, row_begin, row_end); return;
    case DType::kQ3_K: run<Q3K>(op, row_begin, row_end); return;
    case DType::kQ4_K: run<Q4K>(op, row_begin, row_end); return;
    case DType::kQ5_K: run<Q5K>(op, row_begin, row_end); return;
    case DType::kQ6_K: run<Q6K>(op, row_begin, row_end); return;
    default: break;
  }
  KVS_ASSERT(false, "matmul_kquant_avx2: {} is not a K-quant", dtype_name(op.w.type));
}

}  // namespace kvs::detail
