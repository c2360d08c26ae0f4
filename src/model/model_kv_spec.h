// What a model's KV cache holds per token and layer, from its config alone: K and V of its KV heads, or (MLA) one
// latent row of kv_lora_rank + rope_dim. The engine's allocation (DecoderModel::kv_spec) and `kvserve calc -m` both
// read this, so the calculator's figure is the allocation.
#pragma once

#include "core/kv_dtype.h"
#include "kv/kv_cache_spec.h"
#include "model/model_config.h"

namespace kvs {

KvCacheSpec model_kv_spec(const ModelConfig& config, KvDTypes dtype, size_t block_size);

}  // namespace kvs
