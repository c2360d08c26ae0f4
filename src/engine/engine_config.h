// An engine's configuration (the flags of run, serve, perplexity and bench), what its KV cache holds, the pools it
// allocates (kv/kv_pool_layout.h), and the features it turns on (engine/capabilities.h), which the engine checks at
// creation and again with each request's own.
#pragma once

#include "core/clock.h"
#include "engine/capabilities.h"
#include "engine/preemption.h"
#include "kv/kv_pool_layout.h"
#include "kv/policies/kv_policy.h"
#include "kv/tiers/kv_tier_stack.h"
#include "model/model.h"

namespace kvs {

enum class KvLayout {
  kPaged,       // blocks of block_size tokens from a shared pool, allocated as sequences grow
  kContiguous,  // one block of the whole context per sequence: the reference paged attention is tested against
};

struct EngineConfig {
  size_t max_batch_tokens = 512;  // --max-batch-tokens
  size_t max_seqs = 32;           // --max-seqs
  size_t block_size = 16;         // --block-size (paged)
  KvLayout kv_layout = KvLayout::kPaged;
  size_t kv_memory_bytes = 0;         // --kv-memory; 0 = room for max_seqs full contexts or 1 GiB, whichever is less
  size_t kv_blocks = 0;               // --kv-blocks (instead of kv_memory_bytes)
  KvDTypes kv_dtype = KvDType::kF32;  // --kv-dtype (-k, -v): K and V element types
  KvScaleAxis kv_key_scales = KvScaleAxis::kPerChannel;  // --kv-key-scales: grouping of quantized keys
  bool kv_rotate_keys = false;                           // --kv-rotate-keys
  bool prefix_caching = true;         // share cached prompt prefixes across requests (--no-prefix-cache)
  size_t kv_window = 0;               // --kv-window: every layer attends to its last W tokens at most (0: the model's)
  bool kv_hybrid = true;              // layers of different windows in pools of their own (--no-kv-hybrid: one pool)
  KvPolicyParams kv_policy = {};      // --kv-policy, --kv-budget, ...: a request's eviction policy unless it names one
  MlaForm mla_form = MlaForm::kAuto;  // --mla-form: how an MLA model attends (model.h)
  KvTierConfig kv_tiers = {};         // --kv-host, --kv-disk, --kv-disk-size: offload tiers below the pool
  KvPreemptMode kv_preempt = KvPreemptMode::kAuto;  // --kv-preempt: swap a preempted request or recompute it
  const Clock* clock = nullptr;  // where time comes from (outlives the engine); null: the steady clock

  Status validate() const;
};

// Tokens per KV block under `config`: its block size when paged, the model's context when contiguous.
size_t engine_block_size(const Model& model, const EngineConfig& config);
// What the KV cache of an engine of `config` over `model` holds (not yet validated).
KvCacheSpec engine_kv_spec(const Model& model, const EngineConfig& config);
// The KV pools an engine of `config` would allocate for `model` (kv/kv_pool_layout.h, the calculator's sizing).
using EngineKvLayout = KvPoolLayout;
Expected<EngineKvLayout> engine_kv_layout(const Model& model, const EngineConfig& config);

// The features an engine of `config` over `model` has on, with `policy` (resolved) as the eviction policy of the
// request at hand (the engine's own, or a request's).
FeatureSet engine_features(const Model& model, const EngineConfig& config, const KvPolicyParams& policy);

}  // namespace kvs
