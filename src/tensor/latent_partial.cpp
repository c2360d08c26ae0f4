// The parts of Bf16LatentPartial that run on any CPU: which kernel may be used, its buffers, and the merge of runs.
#include "tensor/latent_partial.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/status.h"
#include "tensor/cpu_features.h"
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

bool dpbf16_usable() { return cpu_has_avx512_bf16() && isa_supported(Isa::kAvx512); }

bool latent_kernel_usable(LatentKernel kernel) {
  return kernel == LatentKernel::kAmx ? amx_bf16_usable() : dpbf16_usable();
}

std::optional<LatentKernel> best_latent_kernel() {
  if (amx_bf16_usable()) return LatentKernel::kAmx;
  if (dpbf16_usable()) return LatentKernel::kDpbf16;
  return std::nullopt;
}

std::string_view latent_kernel_name(LatentKernel kernel) {
  return kernel == LatentKernel::kAmx ? "amx-bf16" : "avx512-bf16";
}

void Bf16LatentPartial::start(LatentKernel kernel, const float* q, size_t nq, size_t width, float scale) {
  KVS_ASSERT(latent_kernel_usable(kernel), "{} latent attention on a CPU (or process) without it",
             latent_kernel_name(kernel));
  KVS_ASSERT(nq > 0 && width % 32 == 0 && width > 0 && width <= kMaxWidth,
             "bf16 latent attention takes rows of a multiple of 32 up to {} wide and some heads, not {} x {}",
             kMaxWidth, nq, width);
  kernel_ = kernel;
  nq_ = nq;
  width_ = width;
  groups_ = (nq + kHeads - 1) / kHeads;
  scale_ = scale;
  columns_unpacked_ = kernel == LatentKernel::kDpbf16;
  const size_t rows = groups_ * kHeads;
  qb_.ensure_size(groups_ * (width / 32) * detail::kTileElems);
  o_.ensure_size(rows * width);
  m_.ensure_size(rows);
  l_.ensure_size(rows);
  s_.ensure_size(kSlots * kHeads);
  pt_.ensure_size(detail::kTileElems);
  vb_.ensure_size(width / 16 * detail::kTileElems);
  std::fill_n(o_.data(), rows * width, 0.0f);
  std::fill_n(m_.data(), rows, -std::numeric_limits<float>::infinity());
  std::fill_n(l_.data(), rows, 0.0f);
  detail::pack_latent_queries(q, nq, width, groups_, qb_.data());
}

void Bf16LatentPartial::add(const uint16_t* first, const uint16_t* second, size_t count) {
  KVS_ASSERT(count >= 1 && count <= kSlots && width_ > 0, "bf16 latent attention adds 1 to {} slots, not {}", kSlots,
             count);
  const detail::LatentRunState run{.width = width_,
                                   .groups = groups_,
                                   .scale = scale_,
                                   .qb = qb_.data(),
                                   .o = o_.data(),
                                   .m = m_.data(),
                                   .l = l_.data(),
                                   .s = s_.data(),
                                   .pt = pt_.data(),
                                   .vb = vb_.data()};
  if (kernel_ == LatentKernel::kAmx) {
    detail::amx_latent_add(run, first, second, count);
  } else {
    detail::dpbf16_latent_add(run, first, second, count);
  }
}

void merge_latent_partials(std::span<const Bf16LatentPartial* const> runs, size_t nq, size_t width, float* out) {
  KVS_ASSERT(!runs.empty(), "no runs to merge");
  for (size_t h = 0; h < nq; ++h) {
    float top = -std::numeric_limits<float>::infinity();
    for (const Bf16LatentPartial* run : runs) top = std::max(top, run->m()[h]);
    float denominator = 0.0f;
    float* o = out + h * width;
    std::fill_n(o, width, 0.0f);
    for (const Bf16LatentPartial* run : runs) {
      if (run->l()[h] == 0.0f) continue;  // a run that saw nothing
      const float weight = std::exp(run->m()[h] - top);
      denominator += weight * run->l()[h];
      for (size_t i = 0; i < width; ++i) o[i] += weight * run->o(h, i);
    }
    const float inverse = 1.0f / denominator;
    for (size_t i = 0; i < width; ++i) o[i] *= inverse;
  }
}

}  // namespace kvs
