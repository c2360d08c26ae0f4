// AVX2 matmul over packed Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K weights in groups of 8 rows (tensor/packed_weights.h), for
// CPUs without AVX-VNNI (Haswell, Zen 2/3): vpmaddubsw + vpmaddwd per quad (packed_matmul_impl.h).
#include "tensor/packed_matmul_impl.h"
#include "tensor/packed_ops_avx2.h"

namespace kvs::detail {

void matmul_q8_0x8_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<Avx2PackedOps, DType::kQ8_0>(op, row_begin, row_end);
}
void matmul_q4_0x8_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<Avx2PackedOps, DType::kQ4_0>(op, row_begin, row_end);
}
void matmul_q4_kx8_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<Avx2PackedOps, DType::kQ4_K>(op, row_begin, row_end);
}
void matmul_q5_kx8_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<Avx2PackedOps, DType::kQ5_K>(op, row_begin, row_end);
}
void matmul_q6_kx8_avx2(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<Avx2PackedOps, DType::kQ6_K>(op, row_begin, row_end);
}

}  // namespace kvs::detail
