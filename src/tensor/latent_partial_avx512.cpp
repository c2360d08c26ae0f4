// Bf16LatentPartial's vdpbf16ps kernel (AVX512_BF16, for CPUs without AMX tiles), and the steps the AMX kernel shares:
// the queries as bf16 pairs, the running softmax, the rows interleaved by slot pairs (AMX's value tiles).
//
// The vdpbf16ps kernel, scores: a group's 16 heads are the lanes of a vector; per slot one fp32 accumulator
// [16 heads], and per pair c of columns acc += q pairs c [16 heads][2] . the slot's pair c broadcast: one query load
// serves the 16 slots of a half, each slot's pair is the instruction's broadcast operand. Values: 16 columns are the
// lanes; per head one accumulator [16 columns], and per slot pair j acc += rows 2j and 2j + 1 interleaved (one
// vpunpck[lh]wd of the two rows' 32 columns, in registers) . head h's probability pair j broadcast. The unpack keeps
// 128-bit lanes, so a 32-column chunk's outputs lie in the order its low and high unpacks give (latent_partial.h's
// o() maps them back).
#include <immintrin.h>

#include <limits>

#include "tensor/latent_partial_internal.h"
#include "tensor/simd_avx512.h"

namespace kvs::detail {

using namespace kvs::avx512;

namespace {

// 16 fp32 lanes to bf16 (nearest even) in the low 16 bits of each 32-bit lane.
KVS_ALWAYS_INLINE __m512i bf16_lanes(__m512 v) {
  return _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

// acc + v . (the 32-bit word at pair, two bf16, in every lane), the word read as the instruction's broadcast memory
// operand: GCC does not fold _mm512_set1_epi32 of a load into vdpbf16ps, and a separate vpbroadcastd costs an issue
// slot per product.
KVS_ALWAYS_INLINE __m512 dpbf16_broadcast(__m512 acc, __m512bh v, const void* pair) {
  asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(v), "m"(*static_cast<const int32_t*>(pair)));
  return acc;
}

// s [16 slots][16 heads] = the scores of 16 rows [16][width] (kWidth when not 0: the rows' offsets then fold into the
// instructions, where a width known at run time takes a register add per product) against qb [width / 2][16 heads].
constexpr size_t kDeepseekWidth = 576;  // DeepSeek-V2 and V3: a latent of 512 and a RoPE key of 64
template <size_t kWidth>
KVS_ALWAYS_INLINE void half_scores(const __m512bh* qb, const uint16_t* rows, size_t width, float* s) {
  const size_t stride = kWidth != 0 ? kWidth : width;
  __m512 acc[16];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (size_t c = 0; c < stride / 2; ++c) {
    const __m512bh q = qb[c];
    for (size_t r = 0; r < 16; ++r) acc[r] = dpbf16_broadcast(acc[r], q, rows + r * stride + 2 * c);
  }
  for (size_t r = 0; r < 16; ++r) _mm512_store_ps(s + r * kHeads, acc[r]);
}

}  // namespace

void pack_latent_queries(const float* q, size_t nq, size_t width, size_t groups, uint16_t* qb_out) {
  // Head h's 32 values of chunk c as 16 bf16 pairs, pair j to row j, column h of the chunk's tile.
  const size_t chunks = width / 32;
  const __m512i column = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(kHeads));
  auto* qb = reinterpret_cast<int32_t*>(qb_out);  // [group][chunk][pair][head] as bf16 pairs
  for (size_t h = 0; h < groups * kHeads; ++h) {
    const size_t g = h / kHeads, hh = h % kHeads;
    for (size_t c = 0; c < chunks; ++c) {
      __m512i pairs = _mm512_setzero_si512();
      if (h < nq) {
        const float* src = q + h * width + c * 32;
        pairs = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src)));
      }
      _mm512_i32scatter_epi32(qb + (g * chunks + c) * (kTileElems / 2) + hh, column, pairs, 4);
    }
  }
}

void interleave_slot_pairs(const uint16_t* first, const uint16_t* second, size_t width, uint16_t* vb) {
  const auto row = [&](size_t r) { return r < 16 ? first + r * width : second + (r - 16) * width; };
  __m512i lo_index, hi_index;
  {
    alignas(64) int16_t lo[32], hi[32];
    for (int k = 0; k < 32; ++k) {
      lo[k] = static_cast<int16_t>((k % 2) * 32 + k / 2);
      hi[k] = static_cast<int16_t>((k % 2) * 32 + 16 + k / 2);
    }
    lo_index = _mm512_load_si512(lo);
    hi_index = _mm512_load_si512(hi);
  }
  for (size_t j = 0; j < kSlots / 2; ++j) {
    const uint16_t *even = row(2 * j), *odd = row(2 * j + 1);
    for (size_t c = 0; c < width / 32; ++c) {
      const __m512i a = _mm512_loadu_si512(even + c * 32), b = _mm512_loadu_si512(odd + c * 32);
      _mm512_store_si512(vb + (2 * c) * kTileElems + j * 32, _mm512_permutex2var_epi16(a, lo_index, b));
      _mm512_store_si512(vb + (2 * c + 1) * kTileElems + j * 32, _mm512_permutex2var_epi16(a, hi_index, b));
    }
  }
}

void latent_softmax_step(float* s_rows, size_t count, float scale_factor, float* m, float* l, float* o, size_t width) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 s[kSlots];
  __m512 top = minus_inf;
  const __m512 scale = _mm512_set1_ps(scale_factor);
  for (size_t r = 0; r < kSlots; ++r) {
    s[r] = r < count ? _mm512_mul_ps(_mm512_load_ps(s_rows + r * kHeads), scale) : minus_inf;
    top = _mm512_max_ps(top, s[r]);
  }
  // Raise m where a score passes it by the margin (rescaling l and o), then p = e^(s - m).
  const __m512 old_m = _mm512_loadu_ps(m);
  const __mmask16 raise = _mm512_cmp_ps_mask(top, _mm512_add_ps(old_m, _mm512_set1_ps(kRescaleMargin)), _CMP_GT_OQ);
  __m512 new_m = old_m;
  __m512 factor = _mm512_set1_ps(1.0f);
  if (raise != 0) {
    new_m = _mm512_mask_mov_ps(old_m, raise, top);
    factor = _mm512_mask_mov_ps(factor, raise, exp_ps(_mm512_sub_ps(old_m, new_m)));  // 0 where m was -inf
    _mm512_storeu_ps(l, _mm512_mask_mul_ps(_mm512_loadu_ps(l), raise, _mm512_loadu_ps(l), factor));
    _mm512_storeu_ps(m, new_m);
    alignas(64) float alpha[kHeads];
    _mm512_store_ps(alpha, factor);
    for (size_t h = 0; h < kHeads; ++h) {
      if (!(raise >> h & 1)) continue;
      const __m512 a = _mm512_set1_ps(alpha[h]);
      float* row = o + h * width;
      for (size_t i = 0; i < width; i += 16) _mm512_storeu_ps(row + i, _mm512_mul_ps(_mm512_loadu_ps(row + i), a));
    }
  }
  __m512 sum = _mm512_setzero_ps();
  for (size_t j = 0; j < kSlots / 2; ++j) {
    const __m512 p0 = exp_ps(_mm512_sub_ps(s[2 * j], new_m)), p1 = exp_ps(_mm512_sub_ps(s[2 * j + 1], new_m));
    sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
    _mm512_store_ps(s_rows + 2 * j * kHeads, p0);
    _mm512_store_ps(s_rows + (2 * j + 1) * kHeads, p1);
  }
  _mm512_storeu_ps(l, _mm512_add_ps(_mm512_loadu_ps(l), sum));
}

void dpbf16_latent_add(const LatentRunState& run, const uint16_t* first, const uint16_t* second, size_t count) {
  const size_t width = run.width, pairs = width / 2;
  const auto row = [&](size_t r) { return r < 16 ? first + r * width : second + (r - 16) * width; };
  for (size_t g = 0; g < run.groups; ++g) {
    // Scores [32 slots][16 heads], 16 slots at a time.
    const auto* qb = reinterpret_cast<const __m512bh*>(run.qb) + g * pairs;  // [pair][16 heads]
    for (size_t half = 0; half < 2; ++half) {
      float* const s = run.s + half * 16 * kHeads;
      const uint16_t* rows = half == 0 ? first : second;
      if (width == kDeepseekWidth) {
        half_scores<kDeepseekWidth>(qb, rows, width, s);
      } else {
        half_scores<0>(qb, rows, width, s);
      }
    }
    float* const o = run.o + g * kHeads * width;  // [16 heads][width], each 32-column chunk in unpack order
    latent_softmax_step(run.s, count, run.scale, run.m + g * kHeads, run.l + g * kHeads, o, width);
    // The probabilities as pairs [16 slot pairs][16 heads][2], rounded to bf16.
    auto* p = reinterpret_cast<int32_t*>(run.pt);
    for (size_t j = 0; j < kSlots / 2; ++j) {
      const __m512 p0 = _mm512_load_ps(run.s + 2 * j * kHeads), p1 = _mm512_load_ps(run.s + (2 * j + 1) * kHeads);
      _mm512_store_si512(p + j * kHeads, _mm512_or_si512(bf16_lanes(p0), _mm512_slli_epi32(bf16_lanes(p1), 16)));
    }
    for (size_t c = 0; c < width; c += 32) {
      for (size_t high = 0; high < 2; ++high) {
        __m512 acc[kHeads];
        for (size_t h = 0; h < kHeads; ++h) acc[h] = _mm512_loadu_ps(o + h * width + c + 16 * high);
        for (size_t j = 0; j < kSlots / 2; ++j) {
          const __m512i even = _mm512_loadu_si512(row(2 * j) + c), odd = _mm512_loadu_si512(row(2 * j + 1) + c);
          const auto v =
              reinterpret_cast<__m512bh>(high ? _mm512_unpackhi_epi16(even, odd) : _mm512_unpacklo_epi16(even, odd));
          for (size_t h = 0; h < kHeads; ++h) acc[h] = dpbf16_broadcast(acc[h], v, p + j * kHeads + h);
        }
        for (size_t h = 0; h < kHeads; ++h) _mm512_storeu_ps(o + h * width + c + 16 * high, acc[h]);
      }
    }
  }
}

}  // namespace kvs::detail
