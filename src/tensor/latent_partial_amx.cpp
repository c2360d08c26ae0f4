// AmxLatentPartial's kernels on AMX-BF16 tiles, the softmax between them in AVX-512. Every tile is 16 rows of 64
// bytes: tiles 0 and 1 hold scores [16 slots][16 heads] (fp32), 2 and 3 the rows [16 slots][32] (in their blocks or
// staged), 4 the queries [16 pairs][16 heads][2], 5 the probabilities [16 heads][16 slot pairs][2], 6 the rows
// interleaved by slot pairs [16 pairs][16][2], 7 an output slice [16 heads][16] (fp32).
#include <immintrin.h>

#include <limits>

#include "tensor/latent_partial_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

namespace {

constexpr size_t kTileBytes = 64;
constexpr size_t kTileElems = 512;  // bf16 elements of one 16 x 64-byte tile

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void load_tile_config() {
  TileConfig config;
  for (size_t t = 0; t < 8; ++t) {
    config.colsb[t] = kTileBytes;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// 16 fp32 lanes to bf16 (nearest even) in the low 16 bits of each 32-bit lane.
KVS_ALWAYS_INLINE __m512i bf16_lanes(__m512 v) {
  return _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

}  // namespace

void amx_pack_queries(const float* q, size_t nq, size_t width, size_t groups, uint16_t* qb_out) {
  // Head h's 32 values of chunk c as 16 bf16 pairs, pair j to row j, column h of the chunk's tile.
  const size_t chunks = width / 32;
  const __m512i column = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(kHeads));
  auto* qb = reinterpret_cast<int32_t*>(qb_out);  // [group][chunk][pair][head] as bf16 pairs
  for (size_t h = 0; h < groups * kHeads; ++h) {
    const size_t g = h / kHeads, hh = h % kHeads;
    for (size_t c = 0; c < chunks; ++c) {
      __m512i pairs = _mm512_setzero_si512();
      if (h < nq) {
        const float* src = q + h * width + c * 32;
        pairs = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src)));
      }
      _mm512_i32scatter_epi32(qb + (g * chunks + c) * (kTileElems / 2) + hh, column, pairs, 4);
    }
  }
}

void amx_latent_add(const AmxRunState& run, const uint16_t* first, const uint16_t* second, size_t count) {
  const size_t width = run.width, chunks = width / 32, stride = width * sizeof(uint16_t);
  load_tile_config();
  // The rows as B tiles of the values: vb[c][j] = rows 2j and 2j + 1 over columns [16 c, 16 c + 16), interleaved.
  const auto row = [&](size_t r) { return r < 16 ? first + r * width : second + (r - 16) * width; };
  __m512i lo_index, hi_index;
  {
    alignas(64) int16_t lo[32], hi[32];
    for (int k = 0; k < 32; ++k) {
      lo[k] = static_cast<int16_t>((k % 2) * 32 + k / 2);
      hi[k] = static_cast<int16_t>((k % 2) * 32 + 16 + k / 2);
    }
    lo_index = _mm512_load_si512(lo);
    hi_index = _mm512_load_si512(hi);
  }
  for (size_t j = 0; j < kSlots / 2; ++j) {
    const uint16_t *even = row(2 * j), *odd = row(2 * j + 1);
    for (size_t c = 0; c < chunks; ++c) {
      const __m512i a = _mm512_loadu_si512(even + c * 32), b = _mm512_loadu_si512(odd + c * 32);
      _mm512_store_si512(run.vb + (2 * c) * kTileElems + j * 32, _mm512_permutex2var_epi16(a, lo_index, b));
      _mm512_store_si512(run.vb + (2 * c + 1) * kTileElems + j * 32, _mm512_permutex2var_epi16(a, hi_index, b));
    }
  }
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i pair_row = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                              _mm512_set1_epi32(kSlots / 2));
  for (size_t g = 0; g < run.groups; ++g) {
    // Scores [32 slots][16 heads].
    _tile_zero(0);
    _tile_zero(1);
    const uint16_t* qb = run.qb + g * chunks * kTileElems;
    for (size_t c = 0; c < chunks; ++c) {
      _tile_loadd(4, qb + c * kTileElems, kTileBytes);
      _tile_loadd(2, first + c * 32, stride);
      _tile_loadd(3, second + c * 32, stride);
      _tile_dpbf16ps(0, 2, 4);
      _tile_dpbf16ps(1, 3, 4);
    }
    _tile_stored(0, run.s, kTileBytes);
    _tile_stored(1, run.s + 16 * kHeads, kTileBytes);

    // The running softmax: raise m where a score passes it by the margin (then rescale l and o), p = e^(s - m).
    float* const m = run.m + g * kHeads;
    float* const l = run.l + g * kHeads;
    __m512 s[kSlots];
    __m512 top = minus_inf;
    const __m512 scale = _mm512_set1_ps(run.scale);
    for (size_t r = 0; r < kSlots; ++r) {
      s[r] = r < count ? _mm512_mul_ps(_mm512_load_ps(run.s + r * kHeads), scale) : minus_inf;
      top = _mm512_max_ps(top, s[r]);
    }
    const __m512 old_m = _mm512_loadu_ps(m);
    const __mmask16 raise = _mm512_cmp_ps_mask(top, _mm512_add_ps(old_m, _mm512_set1_ps(kRescaleMargin)), _CMP_GT_OQ);
    __m512 new_m = old_m;
    if (raise != 0) {
      new_m = _mm512_mask_mov_ps(old_m, raise, top);
      alignas(64) float alpha[kHeads];
      _mm512_store_ps(alpha, exp_ps(_mm512_sub_ps(old_m, new_m)));  // 0 where m was -inf (o and l are 0)
      _mm512_storeu_ps(l, _mm512_mask_mul_ps(_mm512_loadu_ps(l), raise, _mm512_loadu_ps(l), _mm512_load_ps(alpha)));
      for (size_t h = 0; h < kHeads; ++h) {
        if (!(raise >> h & 1)) continue;
        float* o = run.o + (g * kHeads + h) * width;
        const __m512 a = _mm512_set1_ps(alpha[h]);
        for (size_t i = 0; i < width; i += 16) _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_loadu_ps(o + i), a));
      }
      _mm512_storeu_ps(m, new_m);
    }
    __m512 sum = _mm512_setzero_ps();
    auto* pt = reinterpret_cast<int32_t*>(run.pt);  // [head][slot pair]
    for (size_t j = 0; j < kSlots / 2; ++j) {
      const __m512 p0 = exp_ps(_mm512_sub_ps(s[2 * j], new_m)), p1 = exp_ps(_mm512_sub_ps(s[2 * j + 1], new_m));
      sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
      const __m512i pair = _mm512_or_si512(bf16_lanes(p0), _mm512_slli_epi32(bf16_lanes(p1), 16));
      _mm512_i32scatter_epi32(pt + j, pair_row, pair, 4);  // head h's pair j
    }
    _mm512_storeu_ps(l, _mm512_add_ps(_mm512_loadu_ps(l), sum));

    // o[h][16 c + n] += sum over slots of p[h][slot] row_slot[16 c + n]. GCC's _tile_loadd is an asm without a memory
    // operand or clobber: the barrier keeps the stores to pt and o above it (a compiler fence, no instruction).
    asm volatile("" ::: "memory");
    _tile_loadd(5, run.pt, kTileBytes);
    float* o = run.o + g * kHeads * width;
    for (size_t c = 0; c < width / 16; ++c) {
      _tile_loadd(7, o + c * 16, width * sizeof(float));
      _tile_loadd(6, run.vb + c * kTileElems, kTileBytes);
      _tile_dpbf16ps(7, 5, 6);
      _tile_stored(7, o + c * 16, width * sizeof(float));
    }
  }
  _tile_release();
}

}  // namespace kvs::detail
