// The parts of AmxLatentPartial that run on any CPU: whether AMX may be used, its buffers, and the merge of runs.
#include "tensor/latent_partial.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/status.h"
#include "tensor/isa.h"
#include "tensor/latent_partial_internal.h"

namespace kvs {
namespace {

// Linux hands the 8 KiB of tile state to a process only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); without it the first tile instruction raises SIGILL.
bool request_tile_state() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

bool amx_bf16_usable() {
  static const bool cpu = cpu_supports_isa(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
                          request_tile_state();
  return cpu && isa_supported(Isa::kAvx512);
}

void AmxLatentPartial::start(const float* q, size_t nq, size_t width, float scale) {
  KVS_ASSERT(amx_bf16_usable(), "AMX latent attention on a CPU (or process) without AMX-BF16 tiles");
  KVS_ASSERT(nq > 0 && width % 32 == 0 && width > 0 && width <= kMaxWidth,
             "AMX latent attention takes rows of a multiple of 32 up to {} wide and some heads, not {} x {}", kMaxWidth,
             nq, width);
  nq_ = nq;
  width_ = width;
  groups_ = (nq + kHeads - 1) / kHeads;
  scale_ = scale;
  constexpr size_t kTileElems = 512;  // bf16 elements of one 16 x 64-byte tile
  const size_t rows = groups_ * kHeads;
  qb_.ensure_size(groups_ * (width / 32) * kTileElems);
  o_.ensure_size(rows * width);
  m_.ensure_size(rows);
  l_.ensure_size(rows);
  s_.ensure_size(kSlots * kHeads);
  pt_.ensure_size(kTileElems);
  vb_.ensure_size(width / 16 * kTileElems);
  std::fill_n(o_.data(), rows * width, 0.0f);
  std::fill_n(m_.data(), rows, -std::numeric_limits<float>::infinity());
  std::fill_n(l_.data(), rows, 0.0f);
  detail::amx_pack_queries(q, nq, width, groups_, qb_.data());
}

void AmxLatentPartial::add(const uint16_t* first, const uint16_t* second, size_t count) {
  KVS_ASSERT(count >= 1 && count <= kSlots && width_ > 0, "AMX latent attention adds 1 to {} slots, not {}", kSlots,
             count);
  const detail::AmxRunState run{.width = width_,
                                .groups = groups_,
                                .scale = scale_,
                                .qb = qb_.data(),
                                .o = o_.data(),
                                .m = m_.data(),
                                .l = l_.data(),
                                .s = s_.data(),
                                .pt = pt_.data(),
                                .vb = vb_.data()};
  detail::amx_latent_add(run, first, second, count);
}

void merge_latent_partials(std::span<const AmxLatentPartial* const> runs, size_t nq, size_t width, float* out) {
  KVS_ASSERT(!runs.empty(), "no runs to merge");
  for (size_t h = 0; h < nq; ++h) {
    float top = -std::numeric_limits<float>::infinity();
    for (const AmxLatentPartial* run : runs) top = std::max(top, run->m()[h]);
    float denominator = 0.0f;
    float* o = out + h * width;
    std::fill_n(o, width, 0.0f);
    for (const AmxLatentPartial* run : runs) {
      if (run->l()[h] == 0.0f) continue;  // a run that saw nothing
      const float weight = std::exp(run->m()[h] - top);
      denominator += weight * run->l()[h];
      const float* from = run->o() + h * width;
      for (size_t i = 0; i < width; ++i) o[i] += weight * from[i];
    }
    const float inverse = 1.0f / denominator;
    for (size_t i = 0; i < width; ++i) o[i] *= inverse;
  }
}

}  // namespace kvs
