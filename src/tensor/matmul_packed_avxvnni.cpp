// AVX-VNNI matmul over packed block-quantized weights in groups of 8 rows (tensor/packed_weights.h):
// one VEX vpdpbusd per quad (8 rows x 4 columns), for Alder Lake, Sapphire Rapids, Zen 5 (packed_matmul_impl.h).
#include "tensor/packed_matmul_impl.h"
#include "tensor/packed_ops_avx2.h"

namespace kvs::detail {
namespace {

struct AvxVnniOps : Avx2PackedOps {
  static constexpr bool kVnni = true;
  static KVS_ALWAYS_INLINE I dpbusd(I acc, I u, I a) { return _mm256_dpbusd_avx_epi32(acc, u, a); }
};

}  // namespace

MatmulRowsFn packed_kernel_avxvnni(DType type) { return packed_kernel_for<AvxVnniOps>(type); }

}  // namespace kvs::detail
