#include "tensor/cpu_features.h"

#include "tensor/isa.h"

namespace kvs {

bool cpu_has_avx512_vnni() {
  static const bool has = isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512vnni");
  return has;
}

bool cpu_has_avx512_bf16() {
  static const bool has = isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  return has;
}

}  // namespace kvs
