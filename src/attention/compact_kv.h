// Compaction of one sequence's cache after an eviction (kv/policies/): the slots a policy keeps move to
// the front, in order, so the blocks past them can go back to the pool whole. Slot j's RoPE position is
// j (positions within the cache), so a key moving from slot s to slot j is re-rotated by j - s:
// RoPE rotations compose (R(a) R(b) = R(a + b)), so the moved key is the one the token would have had
// at its new position, up to the rounding of one more rotation (and of its element type, when not fp32).
// Values, and keys that stay where they are, keep every bit.
//
// Why re-rotate on compaction rather than keep keys before RoPE and rotate them on every read: an
// eviction moves each kept key at most once per evict_unit tokens, where rotation on read would rotate
// every cached key in every layer at every step, in every attention kernel of every format (measured in
// docs/KV_CACHE.md, "Eviction").
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"
#include "kv/kv_storage.h"

namespace kvs {

// How a cached key's position is changed: RoPE over the first 2 * inv_freq.size() elements of each
// head, pairs (2i, 2i + 1) (interleaved) or (i, i + rope_dim / 2) (NeoX). No frequencies: keys carry no
// position, and moving one keeps its bits.
struct KeyRotation {
  std::vector<float> inv_freq;
  bool neox = false;
};

// Rows of the compaction: kept[r], ascending, the old slots that stay in row r = layer * num_kv_heads +
// kv_head of `kv`, the j-th moving to slot j; one row only: every layer and head keeps that set. `blocks`:
// the sequence's block table (slot s in blocks[s / block_size]). Keys quantized per channel cannot move a
// row alone (their scales span groups of rows): refused.
void compact_kv(KvStorage& kv, std::span<const BlockId> blocks, std::span<const std::vector<uint32_t>> kept,
                const KeyRotation& rotation);

// Row `row` of a head-block of format `f` (rows: its view) as fp32, as stored (H k for rotated keys), through
// the vectorized value kernel; formats whose scales are not per channel.
void read_kv_row(const KvTensorFormat& f, const KvRows& rows, size_t row, float* out);

// x (one head's key, fp32, not Hadamard-rotated) re-rotated by `delta` positions.
void shift_key(std::span<float> x, long delta, const KeyRotation& rotation);

}  // namespace kvs
