#include "kv/kv_sizing.h"

#include <fmt/format.h>

#include <bit>

namespace kvs {
namespace {

// Bits of one element (scales are counted apart).
size_t element_bits(KvDType t) {
  switch (t) {
    case KvDType::kF32: return 32;
    case KvDType::kF16:
    case KvDType::kBF16: return 16;
    case KvDType::kInt8: return 8;
    case KvDType::kInt4: return 4;
  }
  return 0;
}

bool quantized(KvDType t) { return t == KvDType::kInt8 || t == KvDType::kInt4; }
constexpr size_t kScaleBytes = 2;  // fp16 scales

}  // namespace

std::optional<KvDType> kv_dtype_from_name(std::string_view n) {
  if (n == "f32" || n == "fp32") return KvDType::kF32;
  if (n == "f16" || n == "fp16") return KvDType::kF16;
  if (n == "bf16") return KvDType::kBF16;
  if (n == "int8" || n == "q8") return KvDType::kInt8;
  if (n == "int4" || n == "q4") return KvDType::kInt4;
  return std::nullopt;
}

std::string_view kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::kF32: return "f32";
    case KvDType::kF16: return "f16";
    case KvDType::kBF16: return "bf16";
    case KvDType::kInt8: return "int8";
    case KvDType::kInt4: return "int4";
  }
  return "unknown";
}

Status KvCacheSpec::validate() const {
  if (contiguous && block_size == 0) return Status::invalid_argument("a contiguous KV block must hold a token, got 0");
  if (!contiguous && (block_size < 1 || block_size > 256 || !std::has_single_bit(block_size))) {
    return Status::invalid_argument(
        fmt::format("block_size must be a power of two between 1 and 256, got {}", block_size));
  }
  if (num_layers == 0) return Status::invalid_argument("the KV cache needs at least one layer, got 0");
  if (mla) {
    if (kv_lora_rank == 0) return Status::invalid_argument("MLA needs a latent width (kv_lora_rank), got 0");
    if (quantized(dtype) && (kv_lora_rank + rope_dim) % 2 != 0) {
      return Status::invalid_argument(
          fmt::format("int4 MLA latent width must be even, got {}", kv_lora_rank + rope_dim));
    }
    return Status::ok();
  }
  if (num_kv_heads == 0 || head_dim == 0) {
    return Status::invalid_argument(
        fmt::format("kv heads ({}) and head dim ({}) must be positive", num_kv_heads, head_dim));
  }
  if (dtype == KvDType::kInt4 && head_dim % 2 != 0) {
    return Status::invalid_argument(fmt::format("int4 KV needs an even head dim, got {}", head_dim));
  }
  return Status::ok();
}

size_t kv_pool_bytes_per_block(const KvCacheSpec& s) {
  // One pool (K, V or the MLA latent) of one layer: elements plus, when quantized, its scales.
  const size_t width = s.mla ? s.kv_lora_rank + s.rope_dim : s.num_kv_heads * s.head_dim;
  const size_t data = s.block_size * width * element_bits(s.dtype) / 8;
  return data;
}

KvBlockBytes kv_bytes_per_block(const KvCacheSpec& s) {
  const size_t pools = s.mla ? 1 : 2;
  KvBlockBytes b;
  b.data = s.num_layers * pools * kv_pool_bytes_per_block(s);
  if (quantized(s.dtype)) {
    if (s.mla) {
      b.scales = s.num_layers * s.block_size * kScaleBytes;  // one scale per token's latent
    } else {
      const size_t k_scales = s.num_kv_heads * s.head_dim * kScaleBytes;    // per channel, per block
      const size_t v_scales = s.block_size * s.num_kv_heads * kScaleBytes;  // per token and head
      b.scales = s.num_layers * (k_scales + v_scales);
    }
  }
  return b;
}

size_t kv_blocks_for_tokens(size_t tokens, size_t block_size) { return (tokens + block_size - 1) / block_size; }

size_t kv_bytes_for_sequences(const KvCacheSpec& s, size_t tokens, size_t seqs) {
  return seqs * kv_blocks_for_tokens(tokens, s.block_size) * kv_bytes_per_block(s).total();
}

double kv_bytes_per_token(const KvCacheSpec& s) {
  return static_cast<double>(kv_bytes_per_block(s).total()) / static_cast<double>(s.block_size);
}

size_t kv_blocks_in_budget(const KvCacheSpec& s, size_t budget) { return budget / kv_bytes_per_block(s).total(); }

size_t kv_max_seqs_in_budget(const KvCacheSpec& s, size_t tokens, size_t budget) {
  const size_t per_seq = kv_bytes_for_sequences(s, tokens, 1);
  return per_seq == 0 ? 0 : budget / per_seq;
}

}  // namespace kvs
