// Dispatch, threading and the scalar reference paths. SIMD kernels live in matmul_*_avx2.cpp and
// matmul_*_avx512.cpp.
#include "tensor/matmul.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "tensor/convert.h"
#include "tensor/cpu_features.h"
#include "tensor/float_panels.h"
#include "tensor/kquant.h"
#include "tensor/legacy_iq4_quant.h"
#include "tensor/matmul_internal.h"

namespace kvs {
namespace {

using detail::MatmulOperands;
using detail::MatmulRowsFn;

// Rows per parallel_for grain: a multiple of every kernel's row tile, and of the packed kernels' row blocks
// (64 or 32 rows: a chunk of rows is whole blocks, each prefetching the next).
constexpr size_t kRowGrain = 64;

// Scalar reference: dequantize one weight row, dot it with every token's activations.
void matmul_rows_scalar(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const WeightView& w = op.w;
  std::vector<float> row(w.cols);
  for (size_t r = row_begin; r < row_end; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    for (size_t t = 0; t < op.n_tokens; ++t) {
      const float* xt = op.x + t * w.cols;
      float acc = 0.0f;
      for (size_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
      op.y[t * w.rows + r] = acc;
    }
  }
}

// F16/BF16 weights in float panels (tensor/float_panels.h).
MatmulRowsFn select_panel_kernel(const WeightView& w, MatmulActivations form, Isa isa) {
  const bool bf16 = w.type == DType::kBF16;
  if (w.layout == WeightLayout::kPackedX16) {
    KVS_ASSERT(isa == Isa::kAvx512, "matmul: {} weights in panels of 16 rows need the avx512 isa, got isa {}",
               dtype_name(w.type), isa_name(isa));
    if (!bf16) return detail::matmul_f16_panels_avx512;
    return form == MatmulActivations::kBf16 ? detail::matmul_bf16dot_panels_avx512 : detail::matmul_bf16_panels_avx512;
  }
  KVS_ASSERT(isa >= Isa::kAvx2, "matmul: {} weights in panels of 8 rows need the avx2 isa or above, got isa {}",
             dtype_name(w.type), isa_name(isa));
  KVS_ASSERT(form == MatmulActivations::kF32, "matmul: {} weights in panels of 8 rows take fp32 activations",
             dtype_name(w.type));
  return bf16 ? detail::matmul_bf16_panels_avx2 : detail::matmul_f16_panels_avx2;
}

MatmulRowsFn select_kernel(const WeightView& w, MatmulActivations form, Isa isa) {
  if (in_float_panels(w)) return select_panel_kernel(w, form, isa);
  if (w.layout == WeightLayout::kPackedX16) {
    KVS_ASSERT(isa == Isa::kAvx512 && cpu_has_avx512_vnni(),
               "matmul: {} weights packed in groups of 16 need the avx512 isa with VNNI, got isa {}",
               dtype_name(w.type), isa_name(isa));
    return detail::packed_kernel_avx512(w.type);
  }
  if (w.layout == WeightLayout::kPackedX8) {
    KVS_ASSERT(isa >= Isa::kAvx2, "matmul: {} weights packed in groups of 8 need the avx2 isa or above, got isa {}",
               dtype_name(w.type), isa_name(isa));
    // The same exact block dots either way: VNNI only changes the speed.
    const bool vnni = isa >= Isa::kAvxVnni && cpu_supports_isa(Isa::kAvxVnni);
    return vnni ? detail::packed_kernel_avxvnni(w.type) : detail::packed_kernel_avx2(w.type);
  }
  const DType type = w.type;
  if (isa == Isa::kScalar)
    return form == MatmulActivations::kInt8Blocks ? detail::matmul_quantized_scalar : matmul_rows_scalar;
  const bool avx512 = isa == Isa::kAvx512;
  switch (type) {
    case DType::kF32: return avx512 ? detail::matmul_f32_avx512 : detail::matmul_f32_avx2;
    case DType::kF16: return avx512 ? detail::matmul_f16_avx512 : detail::matmul_f16_avx2;
    case DType::kBF16:
      if (form == MatmulActivations::kBf16) return detail::matmul_bf16dot_avx512;
      return avx512 ? detail::matmul_bf16_avx512 : detail::matmul_bf16_avx2;
    case DType::kQ8_0: return avx512 && cpu_has_avx512_vnni() ? detail::matmul_q8_0_avx512 : detail::matmul_q8_0_avx2;
    case DType::kQ4_0: return avx512 && cpu_has_avx512_vnni() ? detail::matmul_q4_0_avx512 : detail::matmul_q4_0_avx2;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return avx512 ? detail::matmul_kquant_avx512 : detail::matmul_kquant_avx2;
    // Kernels over the packed layout only (packed at load); row-major, the exact integer reference.
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: return detail::matmul_quantized_scalar;
  }
  KVS_ASSERT(false, "matmul: unknown weight dtype {}", static_cast<uint32_t>(type));
  return nullptr;
}

void check_shapes(const WeightView& w, size_t x_size, size_t n_tokens, size_t y_size) {
  KVS_ASSERT(x_size >= n_tokens * w.cols && y_size >= n_tokens * w.rows,
             "matmul: x has {} floats (need {} = {} tokens x {} cols), y has {} (need {} = {} x {} rows)", x_size,
             n_tokens * w.cols, n_tokens, w.cols, y_size, n_tokens * w.rows, n_tokens, w.rows);
}

// The operands of a Q8_0/Q4_0/K-quant matmul over activations quantized beforehand, checked.
MatmulOperands quantized_operands(const WeightView& w, const QuantizedActivations& xq, std::span<float> y) {
  KVS_ASSERT(is_block_quantized(w.type), "matmul_quantized: weights are {}, need a block-quantized type",
             dtype_name(w.type));
  KVS_ASSERT(xq.cols == w.cols, "matmul_quantized: activations have {} cols, weights {}", xq.cols, w.cols);
  check_shapes(w, xq.n_tokens * xq.cols, xq.n_tokens, y.size());
  return {.w = w, .n_tokens = xq.n_tokens, .xq = &xq, .y = y.data()};
}

// Prefill over float panels reads the activations tiled (tensor/float_panels.h): op.x_tiles or op.xb_tiles.
void tile_for_panels(MatmulOperands& op, MatmulScratch& scratch, ThreadPool* pool) {
  if (!in_float_panels(op.w) || op.n_tokens == 1) return;
  if (op.xb != nullptr) {
    tile_activations_bf16(op.xb->token(0), op.n_tokens, op.w.cols, scratch.xb_tiles, pool);
    op.xb_tiles = scratch.xb_tiles.data();
  } else {
    tile_activations(op.x, op.n_tokens, op.w.cols, scratch.x_tiles, pool);
    op.x_tiles = scratch.x_tiles.data();
  }
}

void run_rows(const MatmulOperands& op, MatmulRowsFn fn, ThreadPool& pool) {
  pool.parallel_for(op.w.rows, kRowGrain, [&](size_t begin, size_t end) { fn(op, begin, end); });
}

}  // namespace

MatmulActivations matmul_activations(DType weight_type, Isa isa) {
  if (isa == Isa::kScalar) return MatmulActivations::kF32;
  if (is_block_quantized(weight_type)) return MatmulActivations::kInt8Blocks;
  if (weight_type == DType::kBF16 && isa == Isa::kAvx512 && cpu_has_avx512_bf16()) return MatmulActivations::kBf16;
  return MatmulActivations::kF32;
}

MatmulActivations matmul_activations(DType weight_type, size_t /*n_tokens*/, Isa isa) {
  return matmul_activations(weight_type, isa);
}

void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y, ThreadPool& pool,
            Isa isa) {
  MatmulScratch scratch;
  matmul(w, x, n_tokens, y, pool, scratch, isa);
}

void matmul(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y, ThreadPool& pool,
            MatmulScratch& scratch, Isa isa) {
  check_shapes(w, x.size(), n_tokens, y.size());
  KVS_ASSERT(isa_supported(isa), "matmul: isa {} is not supported by this CPU", isa_name(isa));
  const MatmulActivations form = matmul_activations(w.type, isa);
  MatmulOperands op{.w = w, .n_tokens = n_tokens, .x = x.data(), .y = y.data()};
  if (form == MatmulActivations::kInt8Blocks) {
    quantize_activations(x.first(n_tokens * w.cols), n_tokens, w.cols, scratch.int8, pool, isa);
    op.xq = &scratch.int8;
  } else if (form == MatmulActivations::kBf16) {
    convert_activations_bf16(x.first(n_tokens * w.cols), n_tokens, w.cols, scratch.bf16, pool, isa);
    op.xb = &scratch.bf16;
  }
  tile_for_panels(op, scratch, &pool);
  run_rows(op, select_kernel(w, form, isa), pool);
}

void matmul_quantized(const WeightView& w, const QuantizedActivations& xq, std::span<float> y, ThreadPool& pool,
                      Isa isa) {
  KVS_ASSERT(isa_supported(isa), "matmul: isa {} is not supported by this CPU", isa_name(isa));
  run_rows(quantized_operands(w, xq, y), select_kernel(w, MatmulActivations::kInt8Blocks, isa), pool);
}

namespace {

// shared: the activations of the items without their own (nullptr: every item has its own).
void run_quantized_group(std::span<const QuantizedMatmul> items, const QuantizedActivations* shared, ThreadPool& pool,
                         Isa isa) {
  KVS_ASSERT(isa_supported(isa), "matmul: isa {} is not supported by this CPU", isa_name(isa));
  std::vector<MatmulOperands> ops;
  std::vector<MatmulRowsFn> fns;
  for (const QuantizedMatmul& item : items) {
    const QuantizedActivations* xq = item.xq != nullptr ? item.xq : shared;
    KVS_ASSERT(xq != nullptr, "matmul_quantized_group: a matrix of {} rows without activations", item.w->rows);
    ops.push_back(quantized_operands(*item.w, *xq, item.y));
    fns.push_back(select_kernel(*item.w, MatmulActivations::kInt8Blocks, isa));
  }
  // One job over every matrix: matrix i contributes the chunks parallel_for would make of it, so the
  // threads share all of them without a barrier between matrices.
  std::vector<size_t> first_chunk{0};
  for (const MatmulOperands& op : ops)
    first_chunk.push_back(first_chunk.back() + pool.chunks_for(op.w.rows, kRowGrain));
  pool.for_chunks(first_chunk.back(), [&](size_t chunk, size_t) {
    const size_t i = std::upper_bound(first_chunk.begin(), first_chunk.end(), chunk) - first_chunk.begin() - 1;
    const size_t chunks = first_chunk[i + 1] - first_chunk[i];
    const auto [begin, end] = ThreadPool::split(ops[i].w.rows, kRowGrain, chunk - first_chunk[i], chunks);
    if (begin < end) fns[i](ops[i], begin, end);
  });
}

}  // namespace

void matmul_quantized_group(std::span<const QuantizedMatmul> items, const QuantizedActivations& xq, ThreadPool& pool,
                            Isa isa) {
  run_quantized_group(items, &xq, pool, isa);
}

void matmul_quantized_group(std::span<const QuantizedMatmul> items, ThreadPool& pool, Isa isa) {
  run_quantized_group(items, nullptr, pool, isa);
}

void matmul_rows(const WeightView& w, std::span<const float> x, size_t n_tokens, std::span<float> y, size_t row_begin,
                 size_t row_end, Isa isa) {
  check_shapes(w, x.size(), n_tokens, y.size());
  KVS_ASSERT(row_begin <= row_end && row_end <= w.rows, "matmul_rows: rows [{}, {}) outside [0, {})", row_begin,
             row_end, w.rows);
  KVS_ASSERT(isa_supported(isa), "matmul: isa {} is not supported by this CPU", isa_name(isa));
  const MatmulActivations form = matmul_activations(w.type, isa);
  MatmulScratch scratch;
  MatmulOperands op{.w = w, .n_tokens = n_tokens, .x = x.data(), .y = y.data()};
  if (form == MatmulActivations::kInt8Blocks) {
    scratch.int8.reshape(n_tokens, w.cols);
    quantize_activations_rows(x, scratch.int8, 0, n_tokens, isa);
    op.xq = &scratch.int8;
  } else if (form == MatmulActivations::kBf16) {
    ThreadPool single(1);
    convert_activations_bf16(x.first(n_tokens * w.cols), n_tokens, w.cols, scratch.bf16, single, isa);
    op.xb = &scratch.bf16;
  }
  tile_for_panels(op, scratch, nullptr);
  select_kernel(w, form, isa)(op, row_begin, row_end);
}

namespace detail {

namespace {

// K-quant rows: per 32-value activation block, I1 = sum_g scale_g sum q a and I2 = sum_g min_g sum a over its two
// 16-value groups (exact integers), then acc += (d d_a) I1 - (dmin d_a) I2.
void matmul_kquant_scalar(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const WeightView& w = op.w;
  const QuantizedActivations& xq = *op.xq;
  const size_t super_blocks = w.cols / kSuperBlock, block_bytes = dtype_block_bytes(w.type);
  std::vector<KBlockInts> row(super_blocks);
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t s = 0; s < super_blocks; ++s) row[s] = decode_k_block(w.type, w.row(r) + s * block_bytes);
    for (size_t t = 0; t < op.n_tokens; ++t) {
      float acc = 0.0f;
      for (size_t b = 0; b < w.cols / 32; ++b) {
        const KBlockInts& blk = row[b / 8];
        const int8_t* a = xq.token_qs(t) + b * 32;
        int32_t i1 = 0, i2 = 0;
        for (size_t half = 0; half < 2; ++half) {
          const size_t g = (b % 8) * 2 + half;
          int32_t dot = 0, sum = 0;
          for (size_t l = 0; l < 16; ++l) {
            dot += int32_t{blk.q[16 * g + l]} * a[16 * half + l];
            sum += a[16 * half + l];
          }
          i1 += blk.scale[g] * dot;
          i2 += blk.min[g] * sum;
        }
        const float da = xq.token_scales(t)[b];
        acc += blk.d * da * static_cast<float>(i1) - blk.dmin * da * static_cast<float>(i2);
      }
      op.y[t * w.rows + r] = acc;
    }
  }
}

}  // namespace

void matmul_quantized_scalar(const MatmulOperands& op, size_t row_begin, size_t row_end) {
  const WeightView& w = op.w;
  if (is_k_quant(w.type)) {
    matmul_kquant_scalar(op, row_begin, row_end);
    return;
  }
  // The 32-value blocks (value d q + m, q int8): acc += (d d_a) dot + (m d_a) sum(a), exact integers dot and sum.
  const QuantizedActivations& xq = *op.xq;
  const size_t nb = w.cols / QuantizedActivations::kBlock;
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t t = 0; t < op.n_tokens; ++t) {
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        BlockInts32 blk;
        if (w.type == DType::kQ8_0) {
          const auto& q8 = reinterpret_cast<const BlockQ8_0*>(w.row(r))[b];
          blk.d = fp16_to_fp32(q8.d);
          std::copy(std::begin(q8.qs), std::end(q8.qs), blk.q);
        } else {
          blk = block_ints32(w.type, w.row(r), b);
        }
        const int8_t* a = xq.token_qs(t) + b * 32;
        int32_t dot = 0, sum = 0;
        for (size_t j = 0; j < 32; ++j) {
          dot += int32_t{blk.q[j]} * a[j];
          sum += a[j];
        }
        const float da = xq.token_scales(t)[b];
        acc += blk.d * da * static_cast<float>(dot);
        if (blk.m != 0.0f) acc += blk.m * da * static_cast<float>(sum);
      }
      op.y[t * w.rows + r] = acc;
    }
  }
}

}  // namespace detail
}  // namespace kvs
