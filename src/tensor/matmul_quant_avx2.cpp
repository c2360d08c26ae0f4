// AVX2 matmul for Q8_0 and Q4_0 weights with int8 block activations (QuantizedActivations), one block
// (32 values) per ymm: the sign trick of llama.cpp turns the signed x signed product into vpmaddubsw's
// unsigned x signed one, |w| * (a * sign(w)), whose int16 pair sums cannot saturate (|a| <= 127).
#include <cstring>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

using namespace kvs::avx2;

KVS_ALWAYS_INLINE uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct Q8Weights {
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  static KVS_ALWAYS_INLINE __m256i load(const std::byte* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
  }
};

struct Q4Weights {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  static KVS_ALWAYS_INLINE __m256i load(const std::byte* p) {  // nibble - 8, in element order
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m256i v =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(q, m)), _mm_and_si128(_mm_srli_epi16(q, 4), m), 1);
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
  }
};

template <class W>
struct QuantKernel {
  using Vec = __m256;
  static constexpr size_t kStep = 32;   // one block
  static constexpr size_t kStripe = 2;  // 68 bytes of Q8_0 weights, about a line
  static constexpr size_t kChains = 2;
  static constexpr size_t kMaxRegisterChains = 8;
  static constexpr size_t kSegment = 2048;
  static constexpr size_t kRowTile = 2;
  // Decode streams one row at a time: a single sequential stream is what the hardware prefetchers follow
  // best (interleaved row streams reached 30-50% of the read bandwidth, measured on Zen 5).
  static constexpr size_t kDecodeRowTile = 1;
  static constexpr size_t kMaxTokens = 3;    // 2 x 3 accumulators + 2 x (w, |w|, scale) of 16 registers
  static constexpr size_t kColChunk = 2048;  // 3 tokens x 2 KiB of int8 activations stay in L1

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

  // Block n.
  template <size_t R, size_t T>
  static KVS_ALWAYS_INLINE void step(const Pointers<R, T>& p, size_t n, Vec (&acc)[T][R]) {
    const size_t b = n, c = n * kStep;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wv[R], wabs[R];
    __m256 dw[R];
#pragma GCC unroll 8
    for (size_t i = 0; i < R; ++i) {
      const std::byte* q = p.w[i] + b * W::kBlockBytes;
      wv[i] = W::load(q);
      wabs[i] = _mm256_sign_epi8(wv[i], wv[i]);
      dw[i] = _mm256_set1_ps(_cvtsh_ss(load_u16(q)));
    }
#pragma GCC unroll 8
    for (size_t j = 0; j < T; ++j) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.a[j] + c));
      const __m256 da = _mm256_set1_ps(p.d[j][b]);
#pragma GCC unroll 8
      for (size_t i = 0; i < R; ++i) {
        const __m256i p16 = _mm256_maddubs_epi16(wabs[i], _mm256_sign_epi8(a, wv[i]));
        const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[j][i] = _mm256_fmadd_ps(dot, _mm256_mul_ps(dw[i], da), acc[j][i]);
      }
    }
  }

  // Never called: the columns are whole blocks.
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
  const QuantKernel<W> kernel{op, op.w.row_bytes(), xq.qs.data(), xq.scales.data()};
  tiling::run(kernel, row_begin, row_end, op.n_tokens, op.w.cols);
}

}  // namespace

void matmul_q8_0_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<Q8Weights>(op, row_begin, row_end);
}
void matmul_q4_0_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  run<Q4Weights>(op, row_begin, row_end);
}

}  // namespace kvs::detail
