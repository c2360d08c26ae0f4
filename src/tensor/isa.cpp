#include "tensor/isa.h"

#include <algorithm>
#include <atomic>

namespace kvs {
namespace {

// The process's kernel ceiling (see isa.h); relaxed loads: it is set before any kernel runs.
std::atomic<Isa> g_isa_limit{Isa::kAvx512};

Isa cpu_best_isa() {
  static const Isa best = cpu_supports_isa(Isa::kAvx512) ? Isa::kAvx512
                          : cpu_supports_isa(Isa::kAvx2) ? Isa::kAvx2
                                                         : Isa::kScalar;
  return best;
}

}  // namespace

bool cpu_supports_isa(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cpu_supports_isa(Isa::kAvx2);
  }
  return false;
}

bool isa_supported(Isa isa) { return isa <= isa_limit() && cpu_supports_isa(isa); }

Isa best_isa() { return std::min(cpu_best_isa(), isa_limit()); }

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

void set_isa_limit(Isa limit) { g_isa_limit.store(limit, std::memory_order_relaxed); }
Isa isa_limit() { return g_isa_limit.load(std::memory_order_relaxed); }

}  // namespace kvs
