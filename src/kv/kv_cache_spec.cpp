#include "kv/kv_cache_spec.h"

#include <fmt/format.h>

#include <bit>

namespace kvs {
namespace {

// An int4 row packs two elements a byte, so its width must be even.
Status check_int4_width(KvDType type, size_t width, std::string_view what) {
  if (type == KvDType::kInt4 && width % 2 != 0)
    return Status::invalid_argument(fmt::format("int4 KV needs an even {}, got {}", what, width));
  return Status::ok();
}

}  // namespace

Status KvCacheSpec::validate() const {
  if (contiguous && block_size == 0) return Status::invalid_argument("a contiguous KV block must hold a token, got 0");
  if (!contiguous && (block_size < 1 || block_size > 256 || !std::has_single_bit(block_size))) {
    return Status::invalid_argument(
        fmt::format("block_size must be a power of two between 1 and 256, got {}", block_size));
  }
  if (num_layers == 0) return Status::invalid_argument("the KV cache needs at least one layer, got 0");
  if (mla) {
    if (kv_lora_rank == 0) return Status::invalid_argument("MLA needs a latent width (kv_lora_rank), got 0");
    return check_int4_width(dtype.k, kv_lora_rank + rope_dim, "MLA latent width");
  }
  if (num_kv_heads == 0 || head_dim == 0) {
    return Status::invalid_argument(
        fmt::format("kv heads ({}) and head dim ({}) must be positive", num_kv_heads, head_dim));
  }
  KVS_RETURN_IF_ERROR(check_int4_width(dtype.k, head_dim, "head dim"));
  if (key_scale_axis == KvScaleAxis::kNone)
    return Status::invalid_argument("the key scale axis must be per channel or per token");
  if (rotate_keys && !std::has_single_bit(head_dim)) {
    return Status::invalid_argument(
        fmt::format("the Hadamard rotation of keys needs a power-of-two head dim, got {}", head_dim));
  }
  return check_int4_width(dtype.v, value_width(), "value head dim");
}

}  // namespace kvs
