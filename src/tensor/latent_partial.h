// Attention of many query heads over one shared row per slot (an MLA latent: absorbed decode reads every head's
// scores and output off the same cached row), on AMX-BF16 tiles. The rows are bf16 as cached; queries and
// probabilities are rounded to bf16 (round to nearest even), products are summed in fp32 by tdpbf16ps. Against the
// fp32 kernels (tensor/attention_ops.h) over the same bf16 rows: a score s = scale * q . k moves by at most
// scale * 2^-8 * sum_i |q_i k_i| (q's rounding; k is exact) plus fp32 rounding, and an output element by at most
// 2^-8 * sum_s p_s |v_s| from p's rounding, plus what the scores' error does to p (the bound is derived and
// tested in tests/attention/latent_amx_attention_test.cpp).
//
// One object is one thread's partial softmax over a run of slots (flash-decoding): the running max m[h] of head h's
// scores (raised only when a score exceeds it by more than kRescaleMargin, so that the accumulators are rescaled
// rarely: p = exp(s - m) <= e^8), l[h] = sum_s exp(s_s - m[h]) and o[h] = sum_s exp(s_s - m[h]) row_s. Runs of one
// query are merged by merge_latent_partials.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/aligned_buffer.h"

namespace kvs {

// AMX-BF16 tiles are usable: the CPU has them, the OS granted this process the tile state, and the process's ISA
// limit (tensor/isa.h) is AVX-512.
bool amx_bf16_usable();

class AmxLatentPartial {
 public:
  static constexpr size_t kSlots = 32;  // rows an add() takes: two tiles of 16
  static constexpr size_t kHeads = 16;  // query heads a tile holds; more go in groups of 16
  static constexpr float kRescaleMargin = 8.0f;

  // Begins a run: q [nq][width] fp32 (width % 32 == 0, at most kMaxWidth), scores scale * q . row.
  void start(const float* q, size_t nq, size_t width, float scale);
  static constexpr size_t kMaxWidth = 1024;
  // The next `count` <= kSlots slots: rows [0, 16) at `first`, rows [16, 32) at `second`, each 16 rows of `width`
  // bf16 back to back. Rows past `count` are read but weigh nothing: they must hold finite values (zeros will do).
  void add(const uint16_t* first, const uint16_t* second, size_t count);
  // The run's state: m, l [nq]; o [nq][width] (unnormalised).
  std::span<const float> m() const { return {m_.data(), nq_}; }
  std::span<const float> l() const { return {l_.data(), nq_}; }
  const float* o() const { return o_.data(); }

 private:
  size_t nq_ = 0, width_ = 0, groups_ = 0;
  float scale_ = 1.0f;
  AlignedBuffer<uint16_t> qb_;  // [group][width / 32][16 pairs][16 heads][2]: the queries as tdpbf16ps B tiles
  AlignedBuffer<float> o_;      // [groups * 16][width]
  AlignedBuffer<float> m_, l_;  // [groups * 16]
  AlignedBuffer<float> s_;      // [32 slots][16 heads]: one group's scores of an add
  AlignedBuffer<uint16_t> pt_;  // [16 heads][32 slots]: their probabilities as an A tile
  AlignedBuffer<uint16_t> vb_;  // [width / 16][16 slot pairs][16][2]: the rows as B tiles, slot pairs interleaved
};

// out[h][:] = attention of head h over all of a query's runs: sum_r e^(m_r - M) o_r / sum_r e^(m_r - M) l_r, with
// M = max_r m_r. o: [nq][width] per run; out: [nq][width].
void merge_latent_partials(std::span<const AmxLatentPartial* const> runs, size_t nq, size_t width, float* out);

}  // namespace kvs
