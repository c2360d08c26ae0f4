// Instruction-set levels the kernels are built for, chosen at run time from CPU features.
//
// A process may lower the level below what the CPU offers (`kvserve --isa`, KVS_ISA for the tests),
// so that a machine with AVX-512 also runs every path of a machine without it. The limit is the
// process's one kernel setting: set it at start-up, before any kernel runs. It is not a per-call
// parameter because dispatch happens inside every kernel entry point, and a host without AVX-512
// is exactly a process whose limit is AVX2.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace kvs {

// Ordered: a limit allows its level and those before it. Each level includes the ones before it, except that a
// CPU may have kAvx512 without kAvxVnni (Zen 4, Ice Lake): then it runs scalar, avx2 and avx512 only.
//   kAvx2    AVX2 + FMA + F16C (Haswell, Zen 2/3)
//   kAvxVnni kAvx2 + AVX-VNNI, the 256-bit vpdpbusd (Alder Lake, Sapphire Rapids, Zen 5)
//   kAvx512  AVX-512 F/BW/VL/DQ (its kernels check VNNI and BF16 separately: cpu_features.h)
enum class Isa { kScalar, kAvx2, kAvxVnni, kAvx512 };

bool cpu_supports_isa(Isa isa);     // does this CPU (and OS) run it, whatever the limit?
bool isa_supported(Isa isa);        // does it run it, and is it within the process's limit?
Isa best_isa();                     // the fastest supported level within the limit
std::vector<Isa> supported_isas();  // scalar first, within the limit
std::string_view isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);  // "scalar", "avx2", "avxvnni", "avx512"

// The highest level kernels may use (default kAvx512: no limit). Levels the CPU lacks stay unused.
void set_isa_limit(Isa limit);
Isa isa_limit();

}  // namespace kvs
