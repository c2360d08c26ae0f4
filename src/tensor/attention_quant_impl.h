// The fused attention kernels of int8 / int4 blocks (layout: core/kv_rows.h), written once over a
// SIMD traits type S and instantiated by each ISA's file (attention_quant_avx2.cpp, _avx512.cpp).
// Quantized elements are widened to fp32 in registers, never into a copy of the block:
//   keys per channel:  q . k = sum_c (q_c scale_c) q_int + sum_c q_c min_c: the query is folded with
//                      each group's scales once, then read against the integer rows;
//   keys per token:    per 32-element group, scale * (q . q_int) + min * sum(q);
//   values per token:  out += (p scale) q_int per group, plus p min summed and added once at the end.
// Rows must be a multiple of 32 elements (per-token groups of exactly 32); the reference handles the rest.
//
// S provides: kLanes; F (a vector of kLanes floats); zero(), set1(x), load(p), store(p, v),
// fmadd(a, b, c), mul(a, b), add(a, b), hsum(v); halves_to_floats(h, out, n) (fp16 -> fp32, n any);
// load_chunk<T>(chunk, v): the 32 integer elements of one chunk as fp32, v[0 .. 32 / kLanes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/kv_rows.h"
#include "core/status.h"

namespace kvs::detail::quant {

inline constexpr size_t kChunk = 32;
inline constexpr size_t kMaxWidth = 512;  // widest row the kernels take (head dims go to 256)
inline constexpr size_t kTileRows = 16;   // rows whose scales are widened to fp32 at once

template <KvDType T>
inline constexpr size_t kChunkBytes = T == KvDType::kInt8 ? 32 : 16;

template <class S, KvDType T>
void scores_per_channel(const float* q, size_t nq, KvRows keys, size_t count, size_t width, float scale, float* scores,
                        size_t stride) {
  using F = typename S::F;
  constexpr size_t L = S::kLanes, V = kChunk / L;
  const size_t chunks = width / kChunk, row_bytes = chunks * kChunkBytes<T>, group = keys.group_size;
  const auto* data = static_cast<const uint8_t*>(keys.data);
  alignas(64) float scales[kMaxWidth], mins[kMaxWidth], folded[kMaxWidth];
  for (size_t first = 0; first < count; first += group) {
    const size_t last = std::min(count, first + group);
    const uint16_t* pairs = keys.scales + first / group * 2 * width;
    S::halves_to_floats(pairs, scales, width);
    S::halves_to_floats(pairs + width, mins, width);
    for (size_t h = 0; h < nq; ++h) {
      const float* qh = q + h * width;
      F bias = S::zero();
      for (size_t c = 0; c < width; c += L) {
        const F qv = S::load(qh + c);
        S::store(folded + c, S::mul(qv, S::load(scales + c)));
        bias = S::fmadd(qv, S::load(mins + c), bias);
      }
      const float b = S::hsum(bias);
      for (size_t s = first; s < last; ++s) {
        const uint8_t* row = data + s * row_bytes;
        F acc[2] = {S::zero(), S::zero()};
        for (size_t ch = 0; ch < chunks; ++ch) {
          F v[V];
          S::template load_chunk<T>(row + ch * kChunkBytes<T>, v);
#pragma GCC unroll 4
          for (size_t j = 0; j < V; ++j) acc[j & 1] = S::fmadd(S::load(folded + ch * kChunk + j * L), v[j], acc[j & 1]);
        }
        scores[h * stride + s] = scale * (b + S::hsum(S::add(acc[0], acc[1])));
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
  alignas(64) float pairs[kTileRows * 2 * (kMaxWidth / kChunk)];  // [row][scales of the row, then mins]
  alignas(64) float q_sums[kMaxWidth / kChunk];
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
  alignas(64) float pairs[kTileRows * 2 * (kMaxWidth / kChunk)];
  for (size_t tile = 0; tile < count; tile += kTileRows) {
    const size_t rows = std::min(kTileRows, count - tile);
    S::halves_to_floats(values.scales + tile * 2 * chunks, pairs, rows * 2 * chunks);
    for (size_t h = 0; h < nq; ++h) {
      const float* p = probs + h * stride + tile;
      float* oh = out + h * width;
      for (size_t ch = 0; ch < chunks; ++ch) {
        F acc[V];
        for (size_t j = 0; j < V; ++j) acc[j] = S::load(oh + ch * kChunk + j * L);
        float bias = 0.0f;
        for (size_t r = 0; r < rows; ++r) {
          const float* row_scales = pairs + r * 2 * chunks;
          bias += p[r] * row_scales[chunks + ch];
          const F w = S::set1(p[r] * row_scales[ch]);
          F v[V];
          S::template load_chunk<T>(data + (tile + r) * row_bytes + ch * kChunkBytes<T>, v);
#pragma GCC unroll 4
          for (size_t j = 0; j < V; ++j) acc[j] = S::fmadd(w, v[j], acc[j]);
        }
        const F b = S::set1(bias);
        for (size_t j = 0; j < V; ++j) S::store(oh + ch * kChunk + j * L, S::add(acc[j], b));
      }
    }
  }
}

template <class S>
void block_scores(const float* q, size_t nq, KvRows keys, size_t count, size_t width, float scale, float* scores,
                  size_t stride) {
  KVS_ASSERT(width % kChunk == 0 && width <= kMaxWidth, "quantized rows of {} elements", width);
  const bool per_channel = keys.axis == KvScaleAxis::kPerChannel;
  if (keys.type == KvDType::kInt8) {
    return per_channel ? scores_per_channel<S, KvDType::kInt8>(q, nq, keys, count, width, scale, scores, stride)
                       : scores_per_token<S, KvDType::kInt8>(q, nq, keys, count, width, scale, scores, stride);
  }
  return per_channel ? scores_per_channel<S, KvDType::kInt4>(q, nq, keys, count, width, scale, scores, stride)
                     : scores_per_token<S, KvDType::kInt4>(q, nq, keys, count, width, scale, scores, stride);
}

template <class S>
void block_values(const float* probs, size_t stride, size_t nq, KvRows values, size_t count, size_t width, float* out) {
  KVS_ASSERT(width % kChunk == 0 && width <= kMaxWidth && values.axis == KvScaleAxis::kPerToken,
             "quantized values of {} elements, scales per {}", width, kv_scale_axis_name(values.axis));
  if (values.type == KvDType::kInt8)
    return values_per_token<S, KvDType::kInt8>(probs, stride, nq, values, count, width, out);
  return values_per_token<S, KvDType::kInt4>(probs, stride, nq, values, count, width, out);
}

}  // namespace kvs::detail::quant
