#include "attention/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "core/status.h"
#include "tensor/attention_ops.h"
#include "tensor/kv_quant.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

constexpr size_t kCacheLine = 64;

void prefetch_l2(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  for (size_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(p + offset, 0, 2);
}

// The next real block after block b, or num_blocks.
size_t next_real_block(std::span<const BlockId> blocks, size_t b, size_t num_blocks) {
  for (++b; b < num_blocks && blocks[b] == kNullBlock;) ++b;
  return b;
}

}  // namespace

void paged_attention(const KvStorage& kv, size_t layer, const PagedContext& context, const AttentionShape& shape,
                     const float* q, float* out, size_t kv_head_begin, size_t kv_head_end, std::span<float> scores,
                     GroupSlice slice) {
  const std::span<const BlockId> blocks = context.blocks;
  const size_t hd = shape.head_dim, vd = shape.value_width();
  const size_t block_size = kv.block_size();
  const size_t group = shape.num_heads / shape.num_kv_heads;
  const size_t heads = kv_head_end - kv_head_begin;
  // Each KV head's query heads [g * group + slice_begin, + sliced): `sliced` rows of scores and output per KV head.
  const size_t slice_begin = slice.begin, sliced = (slice.end == 0 ? group : slice.end) - slice.begin;
  KVS_ASSERT(slice_begin + sliced <= group && sliced > 0, "query heads [{}, {}) of a group of {}", slice.begin,
             slice.end, group);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t num_blocks = (context.num_slots + block_size - 1) / block_size;
  KVS_ASSERT(context.first_slot < context.num_slots, "first slot {} of a context of {} slots", context.first_slot,
             context.num_slots);
  // Scores cover slots [base, num_slots): whole blocks from first_slot's, whose slots before first_slot are masked.
  const size_t first_block = context.first_slot / block_size, base = first_block * block_size;
  const size_t n_ctx = paged_score_slots(context, block_size);
  KVS_ASSERT(num_blocks <= blocks.size(), "context of {} slots needs {} blocks, the list has {}", context.num_slots,
             num_blocks, blocks.size());
  KVS_ASSERT(kv_head_begin <= kv_head_end && kv_head_end <= shape.num_kv_heads, "KV heads [{}, {}) outside [0, {})",
             kv_head_begin, kv_head_end, shape.num_kv_heads);
  KVS_ASSERT(scores.size() >= heads * sliced * n_ctx, "score scratch {} < {} heads x {} x context {}", scores.size(),
             heads, sliced, n_ctx);
  KVS_ASSERT(!context.slot_mass || context.slot_mass.capacity >= context.num_slots, "slot mass of {} for {} slots",
             context.slot_mass.capacity, context.num_slots);
  const Isa isa = best_isa();
  // An MLA latent is its own value: the values are the key rows, whole (a caller wanting the latent's first
  // kv_lora_rank columns reads those of the output).
  const bool latent = !kv.has_values();
  const KvTensorFormat& value_format = latent ? kv.format().k : *kv.format().v;
  KVS_ASSERT(kv.format().k.width == hd && value_format.width == vd,
             "attention of key width {} and value width {} over a cache of widths {} and {}", hd, vd,
             kv.format().k.width, value_format.width);
  const auto values = [&](BlockId block, size_t g) {
    return latent ? kv.keys(layer, block, g) : kv.values(layer, block, g);
  };
  const size_t key_bytes = kv.format().k.head_block_bytes(), value_bytes = value_format.head_block_bytes();
  const size_t first_real = next_real_block(blocks, first_block - 1, num_blocks);  // (0 - 1) + 1 == 0
  KVS_ASSERT(first_real < num_blocks, "no real block among slots [{}, {})", context.first_slot, context.num_slots);
  // KV head g's query rows: q's, or for keys stored rotated (H k) rotated alike ((H q) . (H k) = q . k), in the
  // scratch after the scores. Its output rows.
  const size_t rows = heads * sliced;
  float* const rotated = scores.data() + rows * n_ctx;  // [heads][sliced][head_dim], when the keys are rotated
  const auto q_rows = [&](size_t g) -> const float* {
    return kv.format().k.rotated ? rotated + (g - kv_head_begin) * sliced * hd : q + (g * group + slice_begin) * hd;
  };
  const auto out_rows = [&](size_t g) { return out + (g * group + slice_begin) * vd; };
  if (kv.format().k.rotated) {
    KVS_ASSERT(scores.size() >= rows * (n_ctx + hd), "score scratch {} < {} rows x (context {} + head dim {})",
               scores.size(), rows, n_ctx, hd);
    for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
      float* rows_g = rotated + (g - kv_head_begin) * sliced * hd;
      std::copy_n(q + (g * group + slice_begin) * hd, sliced * hd, rows_g);
      for (size_t r = 0; r < sliced; ++r) hadamard_transform(rows_g + r * hd, hd);
    }
  }

  // Block by block, every KV head of the range in turn: a block's heads lie back to back in the pool
  // ([block][kv_head][slot][head_dim]), so each block is read as one sequential stream rather than one
  // short stream per head. scores[(g - kv_head_begin) * sliced + h][slot - base] for the slice's query head h of
  // KV head g.
  // A hole's scores and those before first_slot are -inf: probability exactly 0 after the softmax, so they
  // add exactly nothing (a hole's values are never read).
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  // Keys two real blocks ahead of use, into L2 (one block ahead left an MLA latent's scores waiting on them:
  // bench_kernels MlaLatentAttention read 1.05-1.2x the slots a second with two).
  size_t key_ahead = next_real_block(blocks, first_real, num_blocks);
  for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
    prefetch_l2(kv.keys(layer, blocks[first_real], g).data, key_bytes);
    if (key_ahead < num_blocks) prefetch_l2(kv.keys(layer, blocks[key_ahead], g).data, key_bytes);
  }
  for (size_t b = first_block; b < num_blocks; ++b) {
    const size_t slot = b * block_size, first = slot - base, count = std::min(block_size, context.num_slots - slot);
    if (blocks[b] == kNullBlock) {
      for (size_t row = 0; row < rows; ++row) std::fill_n(&scores[row * n_ctx + first], count, kMasked);
      continue;
    }
    if (key_ahead < num_blocks) key_ahead = next_real_block(blocks, key_ahead, num_blocks);  // two after b
    // Rows [0, quantized) of the block are read from it, the rest (a filling group) from the key tail.
    const size_t quantized =
        context.key_tail == kNoKeyTail ? count : std::clamp(context.key_tail_first, slot, slot + count) - slot;
    for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
      // Ahead of use, into L2: this head's keys two real blocks on and its values of this block (read
      // after the softmax). The blocks of a context lie anywhere in the pool, so the hardware prefetcher
      // cannot find the next one.
      if (key_ahead < num_blocks) prefetch_l2(kv.keys(layer, blocks[key_ahead], g).data, key_bytes);
      if (!latent) prefetch_l2(values(blocks[b], g).data, value_bytes);
      const float* qg = q_rows(g);
      float* sg = &scores[(g - kv_head_begin) * sliced * n_ctx];
      if (quantized > 0)
        attention_block_scores(qg, sliced, kv.keys(layer, blocks[b], g), quantized, hd, scale, sg + first, n_ctx, isa);
      if (quantized < count) {  // the filling group's rows, from the key tail
        KvRows tail = kv.key_tail_rows(context.key_tail, layer, g);
        tail.data = static_cast<const uint16_t*>(tail.data) + (slot + quantized - context.key_tail_first) * hd;
        attention_block_scores(qg, sliced, tail, count - quantized, hd, scale, sg + first + quantized, n_ctx, isa);
      }
    }
  }
  if (const size_t masked = context.first_slot - base; masked > 0) {
    for (size_t row = 0; row < rows; ++row) std::fill_n(&scores[row * n_ctx], masked, kMasked);
  }
  for (size_t h = 0; h < rows; ++h) softmax(scores.subspan(h * n_ctx, n_ctx), isa);
  if (context.slot_mass) {  // per KV head: its (slice's) query heads' probabilities, summed in order, in fixed point
    for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
      uint64_t* row = context.slot_mass.row(layer, g);
      const float* sg = &scores[(g - kv_head_begin) * sliced * n_ctx];
      for (size_t s = 0; s < n_ctx; ++s) {
        float mass = 0.0f;
        for (size_t h = 0; h < sliced; ++h) mass += sg[h * n_ctx + s];
        if (mass == 0.0f) continue;
        const auto fixed = static_cast<uint64_t>(std::llround(static_cast<double>(mass) * kSlotMassOne));
        std::atomic_ref<uint64_t>(row[base + s]).fetch_add(fixed, std::memory_order_relaxed);
      }
    }
  }
  for (size_t g = kv_head_begin; g < kv_head_end; ++g) std::fill_n(out_rows(g), sliced * vd, 0.0f);
  // Values ahead of use, into L2, as the keys above (a context larger than L2 was evicted since the scores pass,
  // and a block's rows are read in column slices, a pattern the hardware prefetcher cannot follow).
  size_t ahead = next_real_block(blocks, first_real, num_blocks);
  for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
    prefetch_l2(values(blocks[first_real], g).data, value_bytes);
    if (ahead < num_blocks) prefetch_l2(values(blocks[ahead], g).data, value_bytes);
  }
  for (size_t b = first_block; b < num_blocks; ++b) {
    if (blocks[b] == kNullBlock) continue;
    const size_t slot = b * block_size, count = std::min(block_size, context.num_slots - slot);
    if (ahead < num_blocks) ahead = next_real_block(blocks, ahead, num_blocks);  // two real blocks after b
    for (size_t g = kv_head_begin; g < kv_head_end; ++g) {
      if (ahead < num_blocks) prefetch_l2(values(blocks[ahead], g).data, value_bytes);
      attention_block_values(&scores[(g - kv_head_begin) * sliced * n_ctx + slot - base], n_ctx, sliced,
                             values(blocks[b], g), count, vd, out_rows(g), isa);
    }
  }
}

}  // namespace kvs
