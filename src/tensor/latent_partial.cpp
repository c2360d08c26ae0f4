// The parts of AmxLatentPartial that run on any CPU: whether AMX may be used, and the merge of partial runs.
#include "tensor/latent_partial.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/status.h"
#include "tensor/isa.h"

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
