// AVX-VNNI matmul over packed Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K weights in groups of 8 rows (tensor/packed_weights.h):
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

void matmul_q8_0x8_avxvnni(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<AvxVnniOps, DType::kQ8_0>(op, row_begin, row_end);
}
void matmul_q4_0x8_avxvnni(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<AvxVnniOps, DType::kQ4_0>(op, row_begin, row_end);
}
void matmul_q4_kx8_avxvnni(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<AvxVnniOps, DType::kQ4_K>(op, row_begin, row_end);
}
void matmul_q5_kx8_avxvnni(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<AvxVnniOps, DType::kQ5_K>(op, row_begin, row_end);
}
void matmul_q6_kx8_avxvnni(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  matmul_packed<AvxVnniOps, DType::kQ6_K>(op, row_begin, row_end);
}

}  // namespace kvs::detail
