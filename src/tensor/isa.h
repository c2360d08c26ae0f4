// Instruction-set levels the kernels are built for, chosen at run time from CPU features.
#pragma once

#include <string_view>
#include <vector>

namespace kvs {

enum class Isa { kScalar, kAvx2, kAvx512 };

bool isa_supported(Isa isa);           // does this CPU (and OS) run it?
Isa best_isa();                        // the fastest supported level
std::vector<Isa> supported_isas();     // scalar first
std::string_view isa_name(Isa isa);

}  // namespace kvs
