// AVX2 matmul over F16 and BF16 weights packed in panels of 8 rows (tensor/float_panels.h,
// panel_matmul_impl.h): a ymm holds one column of a panel, a lane per row. F16 columns widen with vcvtph2ps, BF16
// pairs with a shift and a mask; exact fp32 x fp32 FMAs, the same bits as the AVX-512 kernel's widened paths.
// Prefill tiles: 2 panels x 6 tokens, 12 accumulators of the 16 registers.
#include "tensor/panel_matmul_impl.h"
#include "tensor/simd_avx2.h"

namespace kvs::detail {
namespace {

struct Avx2Ops {
  using Vec = __m256;
  static constexpr size_t kLanes = 8;
  static constexpr size_t kTilePanels = 2;
  static constexpr size_t kTileTokens = 6;
  static KVS_ALWAYS_INLINE Vec load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static KVS_ALWAYS_INLINE __m256i load_pairs(const uint16_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }
  static KVS_ALWAYS_INLINE Vec even(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
  static KVS_ALWAYS_INLINE Vec odd(__m256i v) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static KVS_ALWAYS_INLINE Vec broadcast(const float* x) { return _mm256_broadcast_ss(x); }
  static KVS_ALWAYS_INLINE Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static KVS_ALWAYS_INLINE Vec zero() { return _mm256_setzero_ps(); }
  static KVS_ALWAYS_INLINE Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static KVS_ALWAYS_INLINE void store(float* y, Vec v, size_t lanes) {
    if (lanes == kLanes) {
      _mm256_storeu_ps(y, v);
      return;
    }
    alignas(32) float all[kLanes];
    _mm256_store_ps(all, v);
    for (size_t i = 0; i < lanes; ++i) y[i] = all[i];
  }
};

}  // namespace

void matmul_f16_panels_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<panels::F16Panels<Avx2Ops>>(op, row_begin, row_end);
}
void matmul_bf16_panels_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  panels::run<panels::Bf16Panels<Avx2Ops>>(op, row_begin, row_end);
}

}  // namespace kvs::detail
