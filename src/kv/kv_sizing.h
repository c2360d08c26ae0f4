// The KV memory calculator. One sizing function serves `kvserve calc` and the engine's
// allocation, so the prediction is the allocation.
//
//   bytes = layers x tokens x kv_heads x head_dim x 2 (K and V) x bytes_per_element x sequences
//
// generalised, through the spec's format (kv/kv_format.h), to:
// - MLA (DeepSeek-V2): one latent of kv_lora_rank + rope_dim values per token and layer, no V;
// - K and V of different element types and widths;
// - quantized elements with their scales: int8/int4 K is quantized per channel (one fp16 scale per
//   channel per block), V per token (one fp16 scale per token and head);
// - block rounding: a sequence holds ceil(tokens / block_size) whole blocks;
// - key tails (keys quantized per channel): the fp16 rows of filling groups, two per sequence (its
//   filling group, and the next block's while a step crosses into it).
#pragma once

#include <cstddef>

#include "kv/kv_cache_spec.h"
#include "kv/kv_format.h"

namespace kvs {

struct KvBlockBytes {
  size_t data = 0;    // element bytes of one block, all layers, K and V
  size_t scales = 0;  // scale bytes of one block, all layers
  size_t total() const { return data + scales; }
};

inline constexpr size_t kKeyTailsPerSequence = 2;

// The bytes one block of `spec.block_size` tokens occupies across every layer.
KvBlockBytes kv_bytes_per_block(const KvCacheSpec& spec);
size_t kv_blocks_for_tokens(size_t tokens, size_t block_size);
// One key tail's bytes (every layer and KV head), and the tails `seqs` sequences at once need; 0 unless
// keys are quantized per channel.
size_t kv_key_tail_bytes(const KvCacheSpec& spec);
size_t kv_key_tails_for_sequences(const KvCacheSpec& spec, size_t seqs);
// Exact bytes for `seqs` sequences of `tokens` tokens each, block-rounded, with their key tails; under a
// sliding window (window > 0) the blocks each holds are those of its window (kv_blocks_held).
size_t kv_bytes_for_sequences(const KvCacheSpec& spec, size_t tokens, size_t seqs, size_t window = 0);
// Bytes per token without block rounding (for the per-token line of the breakdown).
double kv_bytes_per_token(const KvCacheSpec& spec);
// Blocks that fit in a budget beside `num_key_tails` key tails.
size_t kv_blocks_in_budget(const KvCacheSpec& spec, size_t budget_bytes, size_t num_key_tails = 0);
size_t kv_max_seqs_in_budget(const KvCacheSpec& spec, size_t tokens, size_t budget_bytes);

// Sliding windows (window 0: none). The blocks a sequence of `tokens` committed tokens holds: those of
// the positions its next token reads, (tokens - window, tokens], among the ceil(tokens / block_size) written.
size_t kv_blocks_held(size_t tokens, size_t block_size, size_t window);
// Their bytes in a pool of `spec` (a layer group's layers), key tails aside.
size_t kv_bytes_held(const KvCacheSpec& spec, size_t window, size_t tokens);
// The most blocks one sequence holds at once while it grows to `tokens` in chunks of up to `chunk`: the
// (window - 1) positions before a chunk, the chunk, and a block where they straddle a boundary; or all.
size_t kv_max_blocks_per_sequence(size_t block_size, size_t window, size_t tokens, size_t chunk);

}  // namespace kvs
