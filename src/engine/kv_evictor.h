// Runs requests' eviction policies (kv/policies/): when a request's cache holds its whole budget and it
// has a token to compute, its policy picks the slots that stay (from the heavy-hitter scores, when it
// ranks by them), every layer group's storage is compacted to them (attention/compact_kv.h), the scores
// move with their slots, and the KV manager lets go of the blocks past them. Between a step's forward
// passes, so nothing reads the storage while it moves.
#pragma once

#include <span>
#include <vector>

#include "attention/compact_kv.h"
#include "engine/request.h"
#include "kv/hybrid_kv_manager.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace kvs {

class TensorParallelDriver;

// The model's RoPE, with which a compaction moves keys to their new positions (every tensor-parallel rank the same).
KeyRotation model_key_rotation(const ModelConfig& config);

// A compaction's rows for one tensor-parallel rank: `kept` has a row per layer and KV head of the whole model
// (model_kv_heads a layer), or one row for all; a rank holding KV heads [first, first + count) keeps their rows.
std::vector<std::vector<uint32_t>> kept_rows_of_heads(std::span<const std::vector<uint32_t>> kept, size_t num_layers,
                                                      size_t model_kv_heads, size_t first, size_t count);

class KvEvictor {
 public:
  explicit KvEvictor(const Model& model);

  // Evicts from `r`'s cache if it is full; returns the tokens evicted (0: none). `tp`: the compactions are also
  // sent to the other tensor-parallel ranks (their storages hold the other KV heads).
  size_t evict_if_full(Request& r, HybridKvManager& kv, std::span<KvStorage> storages,
                       TensorParallelDriver* tp = nullptr);

 private:
  KeyRotation rotation_;  // the model's RoPE, to move keys to their new positions
  size_t num_layers_, model_kv_heads_;
  size_t first_kv_head_, kv_heads_;  // this rank's KV heads (all of them on a whole model)
  size_t num_rows_;                  // layers x the model's KV heads: the rows a per-head policy keeps sets for
  std::vector<std::vector<uint32_t>> kept_;
  std::vector<double> scores_;
};

}  // namespace kvs
