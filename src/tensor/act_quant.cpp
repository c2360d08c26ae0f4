// Activation conversion: buffers, threading, dispatch and the scalar versions.
#include "tensor/act_quant.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "core/status.h"
#include "tensor/act_quant_internal.h"

namespace kvs {
namespace {

void quantize_blocks(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets, Isa isa) {
  switch (isa) {
    case Isa::kScalar: return detail::quantize_blocks_scalar(x, n_blocks, qs, scales, offsets);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::quantize_blocks_avx2(x, n_blocks, qs, scales, offsets);
    case Isa::kAvx512: return detail::quantize_blocks_avx512(x, n_blocks, qs, scales, offsets);
  }
}

void to_bf16(const float* x, size_t n, uint16_t* out, Isa isa) {
  switch (isa) {
    case Isa::kScalar: return detail::to_bf16_scalar(x, n, out);
    case Isa::kAvxVnni:
    case Isa::kAvx2: return detail::to_bf16_avx2(x, n, out);
    case Isa::kAvx512: return detail::to_bf16_avx512(x, n, out);
  }
}

// sums[g] = qs[16 g] + ... + qs[16 g + 15] for the n / 16 groups (integers: the same on every ISA; the compiler
// vectorizes it).
void group_sums(const int8_t* qs, size_t n, int16_t* sums) {
  constexpr size_t kGroup = QuantizedActivations::kGroup;
  for (size_t g = 0; g < n / kGroup; ++g) {
    int16_t sum = 0;
    for (size_t l = 0; l < kGroup; ++l) sum = static_cast<int16_t>(sum + qs[kGroup * g + l]);
    sums[g] = sum;
  }
}

// Below this many values a conversion runs on the calling thread: it takes a few microseconds, less than
// waking the pool's workers and waiting for them (a batched decode step of 16 sequences converts 16 x dim).
constexpr size_t kParallelValues = size_t{1} << 16;

// Runs fn(t_begin, t_end) over tokens: inline for small inputs, else split over the pool.
template <class Fn>
void for_tokens(size_t n_tokens, size_t cols, ThreadPool& pool, const Fn& fn) {
  if (n_tokens <= 1 || n_tokens * cols < kParallelValues) {
    fn(0, n_tokens);
  } else {
    pool.parallel_for(n_tokens, 1, fn);
  }
}

}  // namespace

void QuantizedActivations::reshape(size_t tokens, size_t columns) {
  KVS_ASSERT(columns % kBlock == 0, "quantized activations need cols % 32 == 0, got {}", columns);
  n_tokens = tokens;
  cols = columns;
  qs.ensure_size(tokens * columns);
  scales.ensure_size(tokens * columns / kBlock);
  offsets.ensure_size(tokens * columns / kBlock);
  group_sums.ensure_size(tokens * columns / kGroup);
}

void quantize_activations(std::span<const float> x, size_t n_tokens, size_t cols, QuantizedActivations& out,
                          ThreadPool& pool, Isa isa) {
  KVS_ASSERT(x.size() >= n_tokens * cols, "quantize_activations: x has {} floats, need {} x {}", x.size(), n_tokens,
             cols);
  out.reshape(n_tokens, cols);
  for_tokens(n_tokens, cols, pool,
             [&](size_t begin, size_t end) { quantize_activations_rows(x, out, begin, end, isa); });
}

void quantize_activations_rows(std::span<const float> x, QuantizedActivations& out, size_t t_begin, size_t t_end,
                               Isa isa) {
  const size_t nb = out.blocks_per_token();
  for (size_t t = t_begin; t < t_end; ++t) {
    int8_t* qs = out.qs.data() + t * out.cols;
    quantize_blocks(x.data() + t * out.cols, nb, qs, out.scales.data() + t * nb, out.offsets.data() + t * nb, isa);
    group_sums(qs, out.cols, out.group_sums.data() + t * (out.cols / QuantizedActivations::kGroup));
  }
}

void copy_quantized_token(const QuantizedActivations& src, size_t from, QuantizedActivations& dst, size_t to) {
  KVS_ASSERT(src.cols == dst.cols && from < src.n_tokens && to < dst.n_tokens,
             "copy_quantized_token: token {} of {} x {} to token {} of {} x {}", from, src.n_tokens, src.cols, to,
             dst.n_tokens, dst.cols);
  const size_t nb = src.blocks_per_token(), ng = src.cols / QuantizedActivations::kGroup;
  std::copy_n(src.token_qs(from), src.cols, dst.qs.data() + to * dst.cols);
  std::copy_n(src.token_scales(from), nb, dst.scales.data() + to * nb);
  std::copy_n(src.token_offsets(from), nb, dst.offsets.data() + to * nb);
  std::copy_n(src.token_group_sums(from), ng, dst.group_sums.data() + to * ng);
}

void Bf16Activations::reshape(size_t tokens, size_t columns) {
  n_tokens = tokens;
  cols = columns;
  values.ensure_size(tokens * columns);
}

void convert_activations_bf16(std::span<const float> x, size_t n_tokens, size_t cols, Bf16Activations& out,
                              ThreadPool& pool, Isa isa) {
  KVS_ASSERT(x.size() >= n_tokens * cols, "convert_activations_bf16: x has {} floats, need {} x {}", x.size(), n_tokens,
             cols);
  out.reshape(n_tokens, cols);
  for_tokens(n_tokens, cols, pool, [&](size_t begin, size_t end) {
    to_bf16(x.data() + begin * cols, (end - begin) * cols, out.values.data() + begin * cols, isa);
  });
}

namespace detail {

void quantize_blocks_scalar(const float* x, size_t n_blocks, int8_t* qs, float* scales, int32_t* offsets) {
  for (size_t b = 0; b < n_blocks; ++b, x += 32, qs += 32) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    // Round half to even, as the SIMD conversions do (default rounding mode).
    int32_t sum = 0;
    for (size_t j = 0; j < 32; ++j) {
      qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
      sum += qs[j];
    }
    scales[b] = d;
    offsets[b] = -128 * sum;
  }
}

void to_bf16_scalar(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = fp32_to_bf16(x[i]);
}

}  // namespace detail
}  // namespace kvs
