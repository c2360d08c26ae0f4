// Tensor parallelism in the engine (model/tensor_shard.h splits the model): rank 0 runs the engine (scheduler,
// the one KV manager that decides placement, sampling, the server) over its shard, and every step broadcasts
// to the other ranks what touches their shards, in order: the KV operations since the last forward pass
// (partial-prefix and copy-on-write slot copies, key-tail copies, an eviction policy's compactions) and the
// forward batch (tokens, positions, per layer group each token's slot and what its attention reads, the rows
// whose logits are wanted). Each worker applies them to its own KV storage (its KV heads, the same block ids)
// and runs its shard's forward pass, whose all-reduces and logits gather meet rank 0's. Block tables are
// therefore identical on every rank by construction.
//
// At start rank 0 and every worker compare their model files (Model::file_fingerprint) and KV layouts (groups,
// blocks, key tails) and agree: a rank that cannot take part (its shard did not load, its file or layout differs)
// stops every rank with an error naming it.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "dist/communicator.h"
#include "engine/engine.h"

namespace kvs {

// Every rank calls this with its own outcome; all return the same: ok, or an error naming each rank that failed
// (and, on that rank, its own message).
Status agree_across_ranks(Communicator& comm, const Status& mine, std::string_view what);

// Rank 0's end (Engine holds one when its model is split over more than one rank).
class TensorParallelDriver {
 public:
  // Sends rank 0's KV pools (null: it failed to start, `mine` says why) to the workers and agrees with them on
  // them (the error names a rank that failed or differs).
  static Expected<std::unique_ptr<TensorParallelDriver>> start(Communicator& comm,
                                                               const std::vector<KvCacheConfig>* groups,
                                                               uint64_t model_fingerprint, const Status& mine);
  ~TensorParallelDriver() { stop(); }

  void copy(size_t group, const KvBlockCopy& copy);
  void compact(size_t group, std::span<const BlockId> blocks, std::span<const std::vector<uint32_t>> kept);
  // Sends the operations recorded so far and `batch`; rank 0 then runs its own forward pass.
  void forward(const ForwardBatch& batch);
  // Tells the workers to return (once).
  void stop();

 private:
  explicit TensorParallelDriver(Communicator& comm) : comm_(comm) {}
  Communicator& comm_;
  std::vector<std::byte> ops_;  // the KV operations since the last forward pass, serialized
  uint32_t num_ops_ = 0;
  std::vector<std::byte> message_;
  bool stopped_ = false;
};

// A worker rank (1..N-1): the engine's KV layout for `shard` under `config` (the same flags as rank 0), then
// steps until rank 0 stops. Returns what went wrong at start (after every rank agreed on it), else ok.
Status run_tensor_parallel_worker(const Model& shard, ThreadPool& pool, const EngineConfig& config, Communicator& comm);

}  // namespace kvs
