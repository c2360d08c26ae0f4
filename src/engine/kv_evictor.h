// Runs requests' eviction policies (kv/policies/): when a request's cache holds its whole budget and it
// has a token to compute, its policy picks the slots that stay (from the heavy-hitter scores, when it
// ranks by them), a compaction of every layer group to them goes into the step's KV op log (kv/kv_ops.h,
// applied before the forward pass), the scores move with their slots, and the KV manager lets go of the
// blocks past them.
#pragma once

#include <vector>

#include "attention/host_kv_executor.h"
#include "engine/request.h"
#include "kv/hybrid_kv_manager.h"
#include "kv/kv_ops.h"
#include "model/model.h"

namespace kvs {

// The model's RoPE, with which a compaction moves keys to their new positions (every tensor-parallel rank the same).
KeyRotation model_key_rotation(const ModelConfig& config);
// The KV heads of `model` (a shard of a split model, or the whole) among the whole model's.
KvHeadShare model_kv_head_share(const Model& model);

class KvEvictor {
 public:
  explicit KvEvictor(const Model& model);

  // Evicts from `r`'s cache if it is full, appending its compactions to `ops`; returns the tokens evicted (0: none).
  size_t evict_if_full(Request& r, HybridKvManager& kv, std::vector<KvOp>& ops);

 private:
  size_t num_rows_;  // layers x the model's KV heads: the rows a per-head policy keeps sets for
  std::vector<std::vector<uint32_t>> kept_;
  std::vector<double> scores_;
};

}  // namespace kvs
