// Bf16LatentPartial's kernel on AMX-BF16 tiles (the softmax between them and the rows' interleaving are
// latent_partial_avx512.cpp's). Every tile is 16 rows of 64 bytes: tiles 0 and 1 hold scores [16 slots][16 heads]
// (fp32), 2 and 3 the rows [16 slots][32] (in their blocks or staged), 4 the queries [16 pairs][16 heads][2], 5 the
// probabilities [16 heads][16 slot pairs][2], 6 the rows interleaved by slot pairs [16 pairs][16][2], 7 an output slice
// [16 heads][16] (fp32).
#include <immintrin.h>

#include "tensor/latent_partial_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

namespace {

constexpr size_t kTileBytes = 64;

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

void amx_latent_add(const LatentRunState& run, const uint16_t* first, const uint16_t* second, size_t count) {
  const size_t width = run.width, chunks = width / 32, stride = width * sizeof(uint16_t);
  load_tile_config();
  interleave_slot_pairs(first, second, width, run.vb);  // the rows as B tiles of the values
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
    asm volatile("" ::: "memory");  // the tile stores (asm without a memory clobber) before s is read

    latent_softmax_step(run.s, count, run.scale, run.m + g * kHeads, run.l + g * kHeads, run.o + g * kHeads * width,
                        width);
    auto* pt = reinterpret_cast<int32_t*>(run.pt);  // [head][slot pair]
    for (size_t j = 0; j < kSlots / 2; ++j) {
      const __m512 p0 = _mm512_load_ps(run.s + 2 * j * kHeads), p1 = _mm512_load_ps(run.s + (2 * j + 1) * kHeads);
      const __m512i pair = _mm512_or_si512(bf16_lanes(p0), _mm512_slli_epi32(bf16_lanes(p1), 16));
      _mm512_i32scatter_epi32(pt + j, pair_row, pair, 4);  // head h's pair j
    }

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
