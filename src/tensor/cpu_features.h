// CPU features beyond the Isa levels that some AVX-512 kernels need (checked at run time).
#pragma once

namespace kvs {

bool cpu_has_avx512_vnni();  // vpdpbusd: int8 dot products (Q8_0/Q4_0 kernels)
bool cpu_has_avx512_bf16();  // vdpbf16ps: bf16 dot products (BF16 prefill kernel)

}  // namespace kvs
