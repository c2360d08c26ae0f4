#include "model/model_kv_spec.h"

namespace kvs {

KvCacheSpec model_kv_spec(const ModelConfig& c, KvDTypes dtype, size_t block_size) {
  if (c.is_mla()) {
    return {.num_layers = c.num_layers,
            .mla = true,
            .kv_lora_rank = c.mla.kv_lora_rank,
            .rope_dim = c.rope_dim,
            .dtype = dtype,
            .block_size = block_size};
  }
  return {.num_layers = c.num_layers,
          .num_kv_heads = c.num_kv_heads,
          .head_dim = c.head_dim,
          .dtype = dtype,
          .block_size = block_size};
}

}  // namespace kvs
