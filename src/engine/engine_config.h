// An engine's configuration (the flags of run, serve, perplexity and bench), what its KV cache holds, the pools it
// allocates (kv/kv_pool_layout.h), and the features it turns on (engine/capabilities.h), which the engine checks at
// creation and again with each request's own.
#pragma once

#include <chrono>

#include "core/clock.h"
#include "engine/capabilities.h"
#include "engine/preemption.h"
#include "kv/kv_options.h"
#include "kv/kv_pool_layout.h"
#include "model/model.h"

namespace kvs {

struct EngineConfig {
  size_t max_batch_tokens = 512;                    // --max-batch-tokens
  size_t max_seqs = 32;                             // --max-seqs
  KvOptions kv = {};                                // what the KV cache is asked to be (kv/kv_options.h)
  MlaForm mla_form = MlaForm::kAuto;                // --mla-form: how an MLA model attends (model.h)
  KvPreemptMode kv_preempt = KvPreemptMode::kAuto;  // --kv-preempt: swap a preempted request or recompute it
  // --kv-load-timeout-ms: the longest a request waits for its prefix to come up from the disk tier before it runs
  // and computes what has not arrived (engine.h: prefix loads)
  std::chrono::milliseconds kv_load_timeout{2000};
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
