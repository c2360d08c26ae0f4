// Attention of many query heads over one shared row per slot (an MLA latent: absorbed decode reads every head's
// scores and output off the same cached row), with bf16 products: on AMX-BF16 tiles, or with vdpbf16ps (AVX512_BF16)
// where the CPU has no tiles. The rows are bf16 as cached; queries and probabilities are rounded to bf16 (round to
// nearest even), products are summed in fp32. Against the fp32 kernels (tensor/attention_ops.h) over the same bf16
// rows: a score s = scale * q . k moves by at most scale * 2^-8 * sum_i |q_i k_i| (q's rounding; k is exact) plus
// fp32 rounding, and an output element by at most 2^-8 * sum_s p_s |v_s| from p's rounding, plus what the scores'
// error does to p (the bound is derived and tested in tests/attention/latent_bf16_attention_test.cpp). Both kernels
// keep to that bound; they sum in different orders, so their bits differ.
//
// One object is one thread's partial softmax over a run of slots (flash-decoding): the running max m[h] of head h's
// scores (raised only when a score exceeds it by more than kRescaleMargin, so that the accumulators are rescaled
// rarely: p = exp(s - m) <= e^8), l[h] = sum_s exp(s_s - m[h]) and o[h] = sum_s exp(s_s - m[h]) row_s. Runs of one
// query are merged by merge_latent_partials.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/aligned_buffer.h"

namespace kvs {

enum class LatentKernel {
  kAmx,     // AMX-BF16 tiles: 16 slots x 16 heads x 32 values a tile product (Sapphire Rapids on)
  kDpbf16,  // AVX512_BF16's vdpbf16ps: 16 heads as lanes, 2 values a lane (Zen 4 on, Cooper Lake)
};
std::string_view latent_kernel_name(LatentKernel kernel);

// AMX-BF16 tiles are usable: the CPU has them, the OS granted this process the tile state, and the process's ISA
// limit (tensor/isa.h) is AVX-512.
bool amx_bf16_usable();
// The CPU has AVX512_BF16 and the process's ISA limit is AVX-512.
bool dpbf16_usable();
bool latent_kernel_usable(LatentKernel kernel);
// AMX where usable, else vdpbf16ps where usable, else none (the fp32 kernels take bf16 latents).
std::optional<LatentKernel> best_latent_kernel();

class Bf16LatentPartial {
 public:
  static constexpr size_t kSlots = 32;  // rows an add() takes: two halves of 16
  static constexpr size_t kHeads = 16;  // query heads a group holds (a tile's columns, a vector's lanes)
  static constexpr float kRescaleMargin = 8.0f;
  static constexpr size_t kMaxWidth = 1024;

  // Begins a run on `kernel` (usable here): q [nq][width] fp32 (width % 32 == 0, at most kMaxWidth), scores
  // scale * q . row.
  void start(LatentKernel kernel, const float* q, size_t nq, size_t width, float scale);
  // The next `count` <= kSlots slots: rows [0, 16) at `first`, rows [16, 32) at `second`, each 16 rows of `width`
  // bf16 back to back. Rows past `count` are read but weigh nothing: they must hold finite values (zeros will do).
  void add(const uint16_t* first, const uint16_t* second, size_t count);
  // The run's state: m, l [nq]; o(h, i) the unnormalised output of head h at column i.
  std::span<const float> m() const { return {m_.data(), nq_}; }
  std::span<const float> l() const { return {l_.data(), nq_}; }
  float o(size_t h, size_t i) const { return o_[h * width_ + (columns_unpacked_ ? unpacked_position(i) : i)]; }

 private:
  LatentKernel kernel_ = LatentKernel::kAmx;
  size_t nq_ = 0, width_ = 0, groups_ = 0;
  // vdpbf16ps keeps each 32 columns of o in the order of its unpacks: within 128-bit lanes L = 0..3, columns
  // 8L..8L+3 in the low 16 outputs, 8L+4..8L+7 in the high 16.
  bool columns_unpacked_ = false;
  static size_t unpacked_position(size_t i) { return i / 32 * 32 + (i % 8 < 4 ? 0 : 16) + i % 32 / 8 * 4 + i % 4; }
  float scale_ = 1.0f;
  AlignedBuffer<uint16_t> qb_;  // [group][width / 2 pairs][16 heads][2]: head h's pair c in lane h (AMX: B tiles)
  AlignedBuffer<float> o_;      // [groups * 16][width]
  AlignedBuffer<float> m_, l_;  // [groups * 16]
  AlignedBuffer<float> s_;      // [32 slots][16 heads]: one group's scores of an add, then their probabilities
  AlignedBuffer<uint16_t> pt_;  // the probabilities: AMX [16 heads][32 slots] (an A tile), vdpbf16ps [16 pairs][16][2]
  AlignedBuffer<uint16_t> vb_;  // AMX: [width / 16][16 slot pairs][16][2]: the rows, slot pairs interleaved
};

// out[h][:] = attention of head h over all of a query's runs: sum_r e^(m_r - M) o_r / sum_r e^(m_r - M) l_r, with
// M = max_r m_r. out: [nq][width].
void merge_latent_partials(std::span<const Bf16LatentPartial* const> runs, size_t nq, size_t width, float* out);

}  // namespace kvs
