// The kernels behind Bf16LatentPartial, over raw pointers: the buffers are sized and filled by latent_partial.cpp,
// compiled for any CPU, so no shared inline code is instantiated with AVX-512 or AMX flags. latent_partial_avx512.cpp
// holds the vdpbf16ps kernel and the steps both kernels share; latent_partial_amx.cpp the tile products.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/latent_partial.h"

namespace kvs::detail {

inline constexpr size_t kSlots = Bf16LatentPartial::kSlots;
inline constexpr size_t kHeads = Bf16LatentPartial::kHeads;
inline constexpr float kRescaleMargin = Bf16LatentPartial::kRescaleMargin;
inline constexpr size_t kTileElems = 512;  // bf16 elements of one 16 x 64-byte tile, or of 16 vectors' pairs

// One run's buffers (Bf16LatentPartial's, described there).
struct LatentRunState {
  size_t width, groups;
  float scale;
  const uint16_t* qb;
  float *o, *m, *l, *s;
  uint16_t *pt, *vb;
};

// qb [groups][width / 2][16 heads][2] = q [nq][width] as bf16 pairs, heads past nq zero. (The same bytes are AMX's
// B tiles [width / 32][16 pairs][16 heads][2].)
void pack_latent_queries(const float* q, size_t nq, size_t width, size_t groups, uint16_t* qb);
// vb[c][j] = rows 2j and 2j + 1 over columns [16 c, 16 c + 16), interleaved: [width / 16][16 pairs][16][2]. Rows
// [0, 16) at first, [16, 32) at second.
void interleave_slot_pairs(const uint16_t* first, const uint16_t* second, size_t width, uint16_t* vb);
// One group's running softmax over an add: s [32 slots][16 heads] holds raw scores and gets p = e^(scale s - m)
// (0 past count); m and l [16] are updated, and where a head's max was raised its row of o [16 heads][width] is
// multiplied by e^(m_old - m_new).
void latent_softmax_step(float* s, size_t count, float scale, float* m, float* l, float* o, size_t width);

void amx_latent_add(const LatentRunState& run, const uint16_t* first, const uint16_t* second, size_t count);
void dpbf16_latent_add(const LatentRunState& run, const uint16_t* first, const uint16_t* second, size_t count);

}  // namespace kvs::detail
