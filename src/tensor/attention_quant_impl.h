// The fused attention kernels of int8 / int4 blocks (layout: core/kv_rows.h), written once over a
// SIMD traits type S and instantiated by each ISA's file (attention_quant_avx2.cpp, _avx512.cpp).
// Quantized elements are widened to fp32 in registers, never into a copy of the block:
//   keys per channel:  q . k = sum_c (q_c scale_c) q_int + sum_c q_c min_c: the query is folded with
//                      each group's scales once and the folded query rounded to integers (steps d =
//                      max |q_c scale_c| / kQueryMax a group and query head: int16 for int8 keys, int8
//                      for int4), so each row is an integer dot product, a key chunk loaded once for up
//                      to kHeadTile query heads (the kernel test bounds what the rounding adds);
//   keys per token:    per 32-element group, scale * (q . q_int) + min * sum(q);
//   values per token:  out += (p scale) q_int per group, plus p min summed and added once at the end;
//                      a chunk of a tile's 16 rows is widened once, into an L1 tile, for all query heads.
// Rows must be a multiple of 32 elements (per-token groups of exactly 32); the reference handles the rest.
//
// S provides: kLanes; F (a vector of kLanes floats); zero(), set1(x), load(p), store(p, v),
// fmadd(a, b, c), mul(a, b), add(a, b), hsum(v); halves_to_floats(h, out, n) (fp16 -> fp32, n any);
// load_chunk<T>(chunk, v): the 32 integer elements of one chunk as fp32, v[0 .. 32 / kLanes);
// I (a vector of int32 sums), izero(), ihsum8(a, sums) (the sums of 8 vectors); Keys, load_keys<T>(chunk)
// (one chunk's 32 integers) and dot_keys<T>(keys, q, acc): acc plus their products with 32 query
// integers; quantize_query<T>(x, n, q): x in steps of d = max |x| / kQueryMax<T>, returning d.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/kv_rows.h"
#include "core/status.h"
#include "tensor/attention_ops_internal.h"

namespace kvs::detail::quant {

inline constexpr size_t kChunk = 32;
inline constexpr size_t kMaxWidth = kQuantMaxWidth;
inline constexpr size_t kMaxTokenWidth = kQuantMaxTokenWidth;
inline constexpr size_t kTileRows = 16;  // rows whose scales are widened to fp32 at once

template <KvDType T>
inline constexpr size_t kChunkBytes = T == KvDType::kInt8 ? 32 : 16;
// The folded query's integers for keys of type T, and their largest magnitude: int8 keys (0..255) take
// int16 steps, kept below 2^31 / (512 x 255) so a row of kMaxWidth products cannot overflow int32.
template <KvDType T>
using QueryInt = std::conditional_t<T == KvDType::kInt8, int16_t, int8_t>;
template <KvDType T>
inline constexpr int32_t kQueryMax = T == KvDType::kInt8 ? 16383 : 127;
// Query heads are taken in tiles of kHeadTile: each key chunk is loaded once for a tile's heads, whose
// sums stay in registers.
inline constexpr size_t kHeadTile = 8;

template <class S, KvDType T>
void scores_per_channel(const float* q, size_t nq, KvRows keys, size_t count, size_t width, float scale, float* scores,
                        size_t stride) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr size_t L = S::kLanes;
  const size_t chunks = width / kChunk, row_bytes = chunks * kChunkBytes<T>, group = keys.group_size;
  const auto* data = static_cast<const uint8_t*>(keys.data);
  alignas(64) float scales[kMaxWidth], mins[kMaxWidth], folded[kMaxWidth];
  alignas(64) QueryInt<T> qi[kHeadTile][kMaxWidth];
  float bias[kHeadTile], step[kHeadTile];
  for (size_t first = 0; first < count; first += group) {
    const size_t last = std::min(count, first + group);
    const uint16_t* pairs = keys.scales + first / group * 2 * width;
    S::halves_to_floats(pairs, scales, width);
    S::halves_to_floats(pairs + width, mins, width);
    for (size_t h0 = 0; h0 < nq; h0 += kHeadTile) {
      const size_t heads = std::min(kHeadTile, nq - h0);
      for (size_t j = 0; j < heads; ++j) {  // each head's query folded with the group's scales, in integer steps
        const float* qh = q + (h0 + j) * width;
        F b = S::zero();
        for (size_t c = 0; c < width; c += L) {
          const F qv = S::load(qh + c);
          S::store(folded + c, S::mul(qv, S::load(scales + c)));
          b = S::fmadd(qv, S::load(mins + c), b);
        }
        bias[j] = S::hsum(b);
        step[j] = S::template quantize_query<T>(folded, width, qi[j]);
      }
      for (size_t s = first; s < last; ++s) {
        const uint8_t* row = data + s * row_bytes;
        I acc[kHeadTile];
        for (size_t j = 0; j < kHeadTile; ++j) acc[j] = S::izero();
        for (size_t ch = 0; ch < chunks; ++ch) {
          const typename S::Keys k = S::template load_keys<T>(row + ch * kChunkBytes<T>);
          for (size_t j = 0; j < heads; ++j) acc[j] = S::template dot_keys<T>(k, qi[j] + ch * kChunk, acc[j]);
        }
        int32_t sums[kHeadTile];
        S::ihsum8(acc, sums);
        for (size_t j = 0; j < heads; ++j)
          scores[(h0 + j) * stride + s] = scale * (bias[j] + step[j] * static_cast<float>(sums[j]));
      }
    }
  }
}

template <class S, KvDType T>
void scores_per_token(const float* q, size_t nq, KvRows keys, size_t count, size_t width, float scale, float* scores,
                      size_t stride) {
  using F = typename S::F;
  constexpr size_t L = S::kLanes, V = kChunk / L;
  const size_t chunks = width / kChunk, row_bytes = chunks * kChunkBytes<T>;
  const auto* data = static_cast<const uint8_t*>(keys.data);
  alignas(64) float pairs[kTileRows * 2 * (kMaxTokenWidth / kChunk)];  // [row][scales of the row, then mins]
  alignas(64) float q_sums[kMaxTokenWidth / kChunk];
  for (size_t tile = 0; tile < count; tile += kTileRows) {
    const size_t rows = std::min(kTileRows, count - tile);
    S::halves_to_floats(keys.scales + tile * 2 * chunks, pairs, rows * 2 * chunks);
    for (size_t h = 0; h < nq; ++h) {
      const float* qh = q + h * width;
      for (size_t ch = 0; ch < chunks; ++ch) {
        F sum = S::zero();
        for (size_t j = 0; j < V; ++j) sum = S::add(sum, S::load(qh + ch * kChunk + j * L));
        q_sums[ch] = S::hsum(sum);
      }
      for (size_t r = 0; r < rows; ++r) {
        const uint8_t* row = data + (tile + r) * row_bytes;
        const float* row_scales = pairs + r * 2 * chunks;
        F acc = S::zero();
        float bias = 0.0f;
        for (size_t ch = 0; ch < chunks; ++ch) {
          F v[V];
          S::template load_chunk<T>(row + ch * kChunkBytes<T>, v);
          F part[2] = {S::zero(), S::zero()};
#pragma GCC unroll 4
          for (size_t j = 0; j < V; ++j) part[j & 1] = S::fmadd(S::load(qh + ch * kChunk + j * L), v[j], part[j & 1]);
          acc = S::fmadd(S::set1(row_scales[ch]), S::add(part[0], part[1]), acc);
          bias += row_scales[chunks + ch] * q_sums[ch];
        }
        scores[h * stride + tile + r] = scale * (S::hsum(acc) + bias);
      }
    }
  }
}

template <class S, KvDType T>
void values_per_token(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t width,
                      float* out) {
  using F = typename S::F;
  constexpr size_t L = S::kLanes, V = kChunk / L;
  const size_t chunks = width / kChunk, row_bytes = chunks * kChunkBytes<T>;
  const auto* data = static_cast<const uint8_t*>(values.data);
  alignas(64) float pairs[kTileRows * 2 * (kMaxTokenWidth / kChunk)];
  alignas(64) float widened[kTileRows][kChunk];  // one chunk of a tile's rows as fp32, for every query head
  for (size_t tile = 0; tile < count; tile += kTileRows) {
    const size_t rows = std::min(kTileRows, count - tile);
    S::halves_to_floats(values.scales + tile * 2 * chunks, pairs, rows * 2 * chunks);
    for (size_t ch = 0; ch < chunks; ++ch) {
      for (size_t r = 0; r < rows; ++r) {
        F v[V];
        S::template load_chunk<T>(data + (tile + r) * row_bytes + ch * kChunkBytes<T>, v);
        for (size_t j = 0; j < V; ++j) S::store(widened[r] + j * L, v[j]);
      }
      for (size_t h = 0; h < nq; ++h) {
        const float* p = probs + h * stride + tile;
        float* oh = out + h * width + ch * kChunk;
        F acc[V];
        for (size_t j = 0; j < V; ++j) acc[j] = S::load(oh + j * L);
        float bias = 0.0f;
        for (size_t r = 0; r < rows; ++r) {
          const float* row_scales = pairs + r * 2 * chunks;
          bias += p[r] * row_scales[chunks + ch];
          const F w = S::set1(p[r] * row_scales[ch]);
#pragma GCC unroll 4
          for (size_t j = 0; j < V; ++j) acc[j] = S::fmadd(w, S::load(widened[r] + j * L), acc[j]);
        }
        const F b = S::set1(bias);
        for (size_t j = 0; j < V; ++j) S::store(oh + j * L, S::add(acc[j], b));
      }
    }
  }
}

template <class S>
void block_scores(const float* q, size_t nq, KvRows keys, size_t count, size_t width, float scale, float* scores,
                  size_t stride) {
  const bool per_channel = keys.axis == KvScaleAxis::kPerChannel;
  KVS_ASSERT(width % kChunk == 0 && width <= (per_channel ? kMaxWidth : kMaxTokenWidth),
             "quantized rows of {} elements, scales per {}", width, kv_scale_axis_name(keys.axis));
  if (keys.type == KvDType::kInt8) {
    return per_channel ? scores_per_channel<S, KvDType::kInt8>(q, nq, keys, count, width, scale, scores, stride)
                       : scores_per_token<S, KvDType::kInt8>(q, nq, keys, count, width, scale, scores, stride);
  }
  return per_channel ? scores_per_channel<S, KvDType::kInt4>(q, nq, keys, count, width, scale, scores, stride)
                     : scores_per_token<S, KvDType::kInt4>(q, nq, keys, count, width, scale, scores, stride);
}

template <class S>
void block_values(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t width, float* out) {
  KVS_ASSERT(width % kChunk == 0 && width <= kMaxTokenWidth && values.axis == KvScaleAxis::kPerToken,
             "quantized values of {} elements, scales per {}", width, kv_scale_axis_name(values.axis));
  if (values.type == KvDType::kInt8)
    return values_per_token<S, KvDType::kInt8>(probs, stride, nq, values, count, width, out);
  return values_per_token<S, KvDType::kInt4>(probs, stride, nq, values, count, width, out);
}

}  // namespace kvs::detail::quant
