// The KV memory calculator. One sizing function serves `kvserve calc` and the engine's
// allocation, so the prediction is the allocation.
//
//   bytes = layers x tokens x kv_heads x head_dim x 2 (K and V) x bytes_per_element x sequences
//
// generalised to:
// - MLA (DeepSeek-V2): one latent of kv_lora_rank + rope_dim values per token and layer, no V;
// - quantized elements with their scales: int8/int4 K is quantized per channel (one fp16 scale per
//   channel per block), V per token (one fp16 scale per token and head);
// - block rounding: a sequence holds ceil(tokens / block_size) whole blocks.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace kvs {

enum class KvDType { kF32, kF16, kBF16, kInt8, kInt4 };
std::optional<KvDType> kv_dtype_from_name(std::string_view name);  // "f32" "fp16"/"f16" "bf16" "int8" "int4"
std::string_view kv_dtype_name(KvDType type);

struct KvCacheSpec {
  size_t num_layers = 0;
  size_t num_kv_heads = 0;  // ignored for MLA
  size_t head_dim = 0;      // ignored for MLA
  bool mla = false;         // cache a compressed latent instead of K and V
  size_t kv_lora_rank = 0;  // MLA latent width
  size_t rope_dim = 0;      // MLA decoupled RoPE key width
  KvDType dtype = KvDType::kF32;
  size_t block_size = 16;   // tokens per block, a power of two in [1, 256] (any size when contiguous)
  bool contiguous = false;  // one block per sequence: the reference layout paged attention is tested against

  Status validate() const;
};

struct KvBlockBytes {
  size_t data = 0;    // element bytes of one block, all layers, K and V
  size_t scales = 0;  // scale bytes of one block, all layers
  size_t total() const { return data + scales; }
};

// The bytes one block of `spec.block_size` tokens occupies across every layer.
KvBlockBytes kv_bytes_per_block(const KvCacheSpec& spec);
// The bytes of one layer's K pool (or V pool) for one block; what KvStorage allocates per block.
size_t kv_pool_bytes_per_block(const KvCacheSpec& spec);
size_t kv_blocks_for_tokens(size_t tokens, size_t block_size);
// Exact bytes for `seqs` sequences of `tokens` tokens each, block-rounded.
size_t kv_bytes_for_sequences(const KvCacheSpec& spec, size_t tokens, size_t seqs);
// Bytes per token without block rounding (for the per-token line of the breakdown).
double kv_bytes_per_token(const KvCacheSpec& spec);
size_t kv_blocks_in_budget(const KvCacheSpec& spec, size_t budget_bytes);
size_t kv_max_seqs_in_budget(const KvCacheSpec& spec, size_t tokens, size_t budget_bytes);

}  // namespace kvs
