// The AMX kernels behind AmxLatentPartial (latent_partial_amx.cpp), over raw pointers: the buffers are sized and
// filled by latent_partial.cpp, compiled for any CPU, so no shared inline code is instantiated with AMX flags.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/latent_partial.h"

namespace kvs::detail {

inline constexpr size_t kSlots = AmxLatentPartial::kSlots;
inline constexpr size_t kHeads = AmxLatentPartial::kHeads;
inline constexpr float kRescaleMargin = AmxLatentPartial::kRescaleMargin;

// One run's buffers (AmxLatentPartial's, described there).
struct AmxRunState {
  size_t width, groups;
  float scale;
  const uint16_t* qb;
  float *o, *m, *l, *s;
  uint16_t *pt, *vb;
};

// qb [groups][width / 32][16 pairs][16 heads][2] = q [nq][width] as bf16 B tiles, heads past nq zero.
void amx_pack_queries(const float* q, size_t nq, size_t width, size_t groups, uint16_t* qb);
// AmxLatentPartial::add's arithmetic.
void amx_latent_add(const AmxRunState& run, const uint16_t* first, const uint16_t* second, size_t count);

}  // namespace kvs::detail
