// Tensor parallelism in the engine (model/tensor_shard.h splits the model): rank 0 runs the engine (scheduler,
// the one KV manager that decides placement, sampling, the server) over its shard, and every step broadcasts
// to the other ranks what touches their shards, in order: the KV op log since the last forward pass
// (kv/kv_ops.h: slot and key-tail copies, compactions, blocks to and from the host tier's slots), which each applies
// with its own executor, and the forward batch (tokens, positions, per layer group each token's slot and what its
// attention reads, the rows whose logits are wanted). Each worker applies them to its own KV storage (its KV heads, the
// same block ids) and runs its shard's forward pass, whose all-reduces and logits gather meet rank 0's. Block tables
// are therefore identical on every rank by construction.
//
// Each engine rank 0 creates is a session: the workers mirror its KV pools (rank 0 sends their specs and sizes),
// compare their model files (Model::file_fingerprint) and agree: a rank that cannot take part (its file differs,
// its shard holds other KV heads) fails the engine's creation on every rank with an error naming it. Commands
// that make several engines (bench, perplexity) run several sessions, one after another or side by side (bench
// interleaves paged and contiguous engines): every message names its session; the workers return at rank 0's end.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "kv/kv_ops.h"
#include "parallel/communicator.h"

namespace kvs {

// Every rank calls this with its own outcome; all return the same: ok, or an error naming each rank that failed
// (and, on that rank, its own message).
Status agree_across_ranks(Communicator& comm, const Status& mine, std::string_view what);

// What the workers need of an engine's KV pools to mirror them: its layer groups (from the model's windows and these
// flags, kv_layer_groups.h) and each group's spec and sizes (the same on every rank: each holds as many KV heads).
struct TensorParallelSession {
  std::vector<KvCacheConfig> groups;
  size_t window = 0;    // EngineConfig::kv_window
  bool hybrid = false;  // layers of different windows in pools of their own
  MlaForm mla_form = MlaForm::kAuto;
  size_t host_tier_bytes = 0;  // the host tier's budget (kv_host_tier_bytes): every rank holds its slots
};

// Rank 0's end of one engine's life (Engine holds one when its model is split over more than one rank).
class TensorParallelDriver {
 public:
  // Sends the session (null: rank 0 failed to start, `mine` says why) and its model file's fingerprint to the
  // workers and agrees with them (the error names a rank that failed or whose file differs).
  static Expected<std::unique_ptr<TensorParallelDriver>> start(Communicator& comm, const TensorParallelSession* session,
                                                               uint64_t model_fingerprint, const Status& mine);
  // After the last engine: the workers return.
  static void end_all(Communicator& comm);
  ~TensorParallelDriver() { stop(); }

  // Queues rank 0's KV op log (applied there) for the workers; it goes with the next forward pass.
  void send(std::span<const KvOp> ops) { ops_.insert(ops_.end(), ops.begin(), ops.end()); }
  // Sends the KV ops queued so far and `batch`; rank 0 then runs its own forward pass.
  void forward(const ForwardBatch& batch);
  // After rank 0's forward pass of `batch`: adds the other ranks' attention mass to its sequences' slot mass (the
  // heavy-hitter scores of the KV heads they hold; nothing when no sequence gathers it).
  void add_scores(const ForwardBatch& batch);
  // Ends this engine's session on the workers (once); they free its KV pools.
  void stop();
  // The session's name in every message: unique among the drivers alive on rank 0.
  uint64_t id() const { return reinterpret_cast<uintptr_t>(this); }

 private:
  explicit TensorParallelDriver(Communicator& comm) : comm_(comm) {}
  Communicator& comm_;
  std::vector<KvOp> ops_;  // the KV op log since the last forward pass
  std::vector<std::byte> message_;
  std::vector<uint64_t> scores_;  // add_scores' buffer
  bool stopped_ = false;
};

// Rank 0's KV op log under tensor parallelism: applied here by `local`, and queued for the workers, whose executors
// apply it before their forward pass of the next batch (the driver must outlive this).
class ReplicatedKvExecutor final : public KvExecutor {
 public:
  ReplicatedKvExecutor(std::unique_ptr<KvExecutor> local, TensorParallelDriver& driver)
      : local_(std::move(local)), driver_(driver) {}
  Expected<KvApplyStats> apply(std::span<const KvOp> ops) override {
    driver_.send(ops);
    return local_->apply(ops);
  }
  void attach_tiers(HostSlabs* slabs, KvTierStack* disk) override { local_->attach_tiers(slabs, disk); }
  Status wait_for_transfers() override { return local_->wait_for_transfers(); }

 private:
  std::unique_ptr<KvExecutor> local_;
  TensorParallelDriver& driver_;
};

// Rank 0's forward pass under tensor parallelism: the batch goes to the workers, which run their shards with rank 0's
// (their all-reduces and the logits gather meet), then the other ranks' attention mass is added to rank 0's (the
// heavy-hitter policies' scores). The driver must outlive this.
class TensorParallelRunner final : public ModelRunner {
 public:
  TensorParallelRunner(std::unique_ptr<ModelRunner> local, TensorParallelDriver& driver)
      : local_(std::move(local)), driver_(driver) {}
  void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) override {
    driver_.forward(batch);
    local_->forward(batch, kv, logits);
    driver_.add_scores(batch);
  }
  double communication_seconds() const override { return local_->communication_seconds(); }
  uint64_t num_collectives() const override { return local_->num_collectives(); }

 private:
  std::unique_ptr<ModelRunner> local_;
  TensorParallelDriver& driver_;
};

// A worker rank (1..N-1): serves rank 0's engines (each: mirror its KV pools, then its steps until it stops; several
// may be open at once) until rank 0 ends them all. Returns what went wrong at the last engine's start (every rank
// agreed on it; rank 0 reports it), else ok.
Status run_tensor_parallel_worker(const Model& shard, ThreadPool& pool, Communicator& comm);

}  // namespace kvs
