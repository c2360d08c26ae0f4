#include "tensor/isa.h"

namespace kvs {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             isa_supported(Isa::kAvx2);
  }
  return false;
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::kAvx512) ? Isa::kAvx512
                          : isa_supported(Isa::kAvx2) ? Isa::kAvx2
                                                      : Isa::kScalar;
  return best;
}

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

}  // namespace kvs
