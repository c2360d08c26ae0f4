// What a KV cache is asked to be, as the flags of run, serve, perplexity and bench say it: one value that every
// configuration holds (the engine's, the evaluations', the benchmarks') and passes by const&, so a new KV flag is one
// field here and one line where the flag is parsed. What the cache then holds for a model is the engine's to derive
// (engine/engine_config.h engine_kv_spec, kv/kv_pool_layout.h).
#pragma once

#include <cstddef>

#include "core/kv_dtype.h"
#include "kv/policies/kv_policy.h"
#include "kv/tiers/kv_tier_stack.h"

namespace kvs {

enum class KvLayout {
  kPaged,       // blocks of block_size tokens from a shared pool, allocated as sequences grow
  kContiguous,  // one block of the whole context per sequence: the reference paged attention is tested against
};

struct KvOptions {
  size_t block_size = 16;  // --block-size (paged)
  KvLayout layout = KvLayout::kPaged;
  size_t memory_bytes = 0;         // --kv-memory; 0: room for max_seqs full contexts or 1 GiB, the less
  size_t blocks = 0;               // --kv-blocks (instead of memory_bytes)
  KvDTypes dtype = KvDType::kF32;  // --kv-dtype (-k, -v): K and V element types
  KvScaleAxis key_scales = KvScaleAxis::kPerChannel;  // --kv-key-scales: grouping of quantized keys
  bool rotate_keys = false;                           // --kv-rotate-keys
  bool prefix_caching = true;  // share cached prompt prefixes across requests (--no-prefix-cache)
  size_t window = 0;           // --kv-window: every layer attends to its last W tokens at most (0: the model's)
  bool hybrid = true;          // layers of different windows in pools of their own (--no-kv-hybrid: one pool)
  KvPolicyParams policy = {};  // --kv-policy, --kv-budget, ...: a request's eviction policy unless it names one
  KvTierConfig tiers = {};     // --kv-host, --kv-disk, --kv-disk-size: offload tiers below the pool
};

}  // namespace kvs
