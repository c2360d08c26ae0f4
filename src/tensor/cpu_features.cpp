#include "tensor/cpu_features.h"

#include "tensor/isa.h"

namespace kvs {

// The CPU flags are read once; the ISA limit (isa.h) is applied on every call.
bool cpu_has_avx512_vnni() {
  static const bool cpu = cpu_supports_isa(Isa::kAvx512) && __builtin_cpu_supports("avx512vnni");
  return cpu && isa_supported(Isa::kAvx512);
}

bool cpu_has_avx512_bf16() {
  static const bool cpu = cpu_supports_isa(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  return cpu && isa_supported(Isa::kAvx512);
}

}  // namespace kvs
