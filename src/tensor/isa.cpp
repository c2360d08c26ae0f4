#include "tensor/isa.h"

#include <cpuid.h>

#include <atomic>

namespace kvs {
namespace {

// The process's kernel ceiling (see isa.h); relaxed loads: it is set before any kernel runs.
std::atomic<Isa> g_isa_limit{Isa::kAvx512};

constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512};

// CPUID leaf 7, sub-leaf 1, EAX bit 4. (GCC 12's __builtin_cpu_supports("avxvnni") reads 0 on CPUs that have it.)
bool cpu_has_avx_vnni_bit() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax >> 4 & 1u) != 0;
}

}  // namespace

bool cpu_supports_isa(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kAvxVnni: {
      static const bool vnni = cpu_has_avx_vnni_bit();
      return vnni && cpu_supports_isa(Isa::kAvx2);
    }
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cpu_supports_isa(Isa::kAvx2);
  }
  return false;
}

bool isa_supported(Isa isa) { return isa <= isa_limit() && cpu_supports_isa(isa); }

Isa best_isa() {
  Isa best = Isa::kScalar;
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) best = isa;
  return best;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvxVnni: return "avxvnni";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (Isa isa : kAllIsas)
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

void set_isa_limit(Isa limit) { g_isa_limit.store(limit, std::memory_order_relaxed); }
Isa isa_limit() { return g_isa_limit.load(std::memory_order_relaxed); }

}  // namespace kvs
