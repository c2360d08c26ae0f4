// AVX2 matmul over packed block-quantized weights in groups of 8 rows (tensor/packed_weights.h), for
// CPUs without AVX-VNNI (Haswell, Zen 2/3): vpmaddubsw + vpmaddwd per quad (packed_matmul_impl.h).
#include "tensor/packed_matmul_impl.h"
#include "tensor/packed_ops_avx2.h"

namespace kvs::detail {

MatmulRowsFn packed_kernel_avx2(DType type) { return packed_kernel_for<Avx2PackedOps>(type); }

}  // namespace kvs::detail
