// The serving engine, and the one path every command runs the model through (run, perplexity,
// bench, serve, the golden tests): many requests share one model and one KV pool. add_request
// queues a request; each step() first lets requests under an eviction policy whose cache is full evict
// (engine/kv_evictor.h), then schedules (continuous batching, chunked prefill, preemption),
// builds the model input in one place (batch_builder), runs one forward pass over every scheduled
// token, samples, detokenizes, checks stops, and reports outputs through each request's sink.
// Single-threaded: EngineLoop drives it from one thread for the server.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch_builder.h"
#include "engine/engine_config.h"
#include "engine/kv_evictor.h"
#include "engine/logits_processor.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/hybrid_kv_manager.h"
#include "kv/kv_layer_groups.h"
#include "kv/kv_pool_layout.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

class TensorParallelDriver;

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> create(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                                  const EngineConfig& config);
  // With a disk tier: writes the pool's cached blocks it does not hold yet, so a restart finds them.
  ~Engine();

  // Validates and queues. Fails (invalid_argument / out_of_range / out_of_memory) when the request
  // can never run: empty prompt, prompt longer than the context, prompt larger than the whole pool.
  Expected<SeqId> add_request(RequestParams params, OutputSink sink);
  // Ends a request now (client gone), every sample of it: their blocks are freed, a final output
  // with kAborted follows for each.
  void abort(SeqId id);
  void abort_all();
  // One scheduling iteration; returns false when there was nothing to do.
  bool step();
  bool has_work() const { return !requests_.empty(); }

  EngineMetrics metrics() const;
  const HybridKvManager& kv() const { return *kv_; }
  size_t kv_storage_bytes() const;
  const KvLayerGroups& kv_layers() const { return layers_; }
  const ModelConfig& model_config() const { return model_.config(); }
  const KvTierStack* kv_tiers() const { return tiers_.get(); }
  KvExecutor& kv_executor() { return *executor_; }  // what moves the KV bytes (tests inject device faults there)
  const ModelRunner& runner() const { return *runner_; }

 private:
  Engine(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const EngineConfig& config,
         EngineKvLayout layout, std::unique_ptr<HybridKvManager> kv);
  struct PendingOutput {
    SeqId seq;  // the sequence whose sink gets it
    RequestOutput output;
  };
  // Samples after a chunk that reached the end of its request's tokens; true when it finished.
  bool advance(Request& r, std::span<const float> logits, std::vector<PendingOutput>& outputs);
  // The other samples of `first`, whose prompt was just computed: each shares its blocks and draws
  // its first token from the same logits.
  void fork_samples(Request& first, std::span<const float> logits, std::vector<PendingOutput>& outputs);
  void finish(Request& r, FinishReason reason, RequestOutput& out);
  // Gives `r` its resolved policy (validated with the request) and the scores it ranks by.
  void attach_policy(Request& r, const KvPolicyParams& policy) const;
  // Engine::create without the tensor-parallel start.
  static Expected<std::unique_ptr<Engine>> create_local(const Model& model, const Tokenizer& tokenizer,
                                                        ThreadPool& pool, const EngineConfig& config);
  // Sets up config_.kv.tiers below the pool; a disk directory that cannot be used is logged and left out.
  Status attach_tiers();
  // Prefix loads: brings the prefixes of the first waiting requests up the tiers (kv_cache_manager.h's
  // load_prefix(): host tier blocks into the pool, disk reads started), a wave a step. A request whose prefix is
  // still being read waits (kv_loading: the scheduler passes it over; those behind it may run) while reading is
  // cheaper than computing those tokens at the measured rates. The wait times out (then the request runs and
  // computes whatever has not arrived) when the disk tier has reads on the way and has finished none for
  // config_.kv_load_timeout (a stuck disk: however long other requests' steps take, the reads go on meanwhile), or
  // when the wait has lasted the time computing the blocks it began waiting for would take at the measured prefill
  // rate, plus that timeout (blocks that keep coming and going in a small host tier; no such bound while the rate is
  // unmeasured). Waits, timeouts and skips are counted in the metrics.
  // False when the moves it waited for failed (lose_kv()).
  bool prefetch_waiting();
  // Whether reading `disk_blocks` blocks back costs less than computing their tokens, at the disk tier's measured
  // read rate and the measured prefill rate (unmeasured: true).
  bool load_beats_recompute(size_t disk_blocks) const;
  // The time computing `blocks` blocks' tokens takes at the measured prefill rate (unmeasured: none).
  std::optional<std::chrono::nanoseconds> recompute_time(size_t blocks) const;
  // The step's KV op log (kv/kv_ops.h): the compactions already in it, then the offload planner's tier moves and the
  // managers' slot copies, applied by the executor (and sent to the other tensor-parallel ranks) before the forward
  // pass; then the managers' pins on what the moves read are let go. False when the log failed (lose_kv()).
  bool apply_kv_ops();
  // The managers' transfers and copies of the step are done (or lost): their pins on what the moves read go.
  void kv_ops_done();
  // After the KV op log failed where the executor cannot say what moved (a device lost a transfer it took): nothing
  // the pool or the host tier holds is trusted. Every running request goes back to wait and computes its K/V again
  // from its tokens (a preemption by recompute), swapped ones lose what they kept, the pool's and the host tier's
  // cached blocks are forgotten; the disk tier stays (it is written from finished moves only, and checksummed).
  // Counted in kv_transfers_lost_total and logged. No output changes: every token is computed again or read from
  // what was checked.
  void lose_kv(const Status& why);
  // Every sequence the scheduler holds is one of this engine's requests.
  static Request& as_request(SequenceState* seq) { return *static_cast<Request*>(seq); }

  const Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  SteadyClock steady_clock_;
  const Clock& clock_;                        // config_.clock, or steady_clock_
  EngineCapabilities capabilities_;           // what its requests are validated against
  KvLayerGroups layers_;                      // which pool each layer's K/V live in
  std::unique_ptr<KvTierStack> tiers_;        // offload tiers below the pool (none unless configured)
  std::unique_ptr<HybridKvManager> kv_;       // block accounting, per layer group
  std::unique_ptr<TensorParallelDriver> tp_;  // a model split over ranks (outlives the runner and executor using it)
  std::vector<KvStorage> storages_;           // [layer group]: the K/V bytes its blocks index
  std::vector<KvCacheConfig> kv_groups_;      // [layer group]: what its pool was made of
  std::unique_ptr<KvExecutor> executor_;      // applies the KV op log (and, split over ranks, sends it to them)
  std::vector<KvOp> kv_ops_;                  // this step's KV op log
  uint64_t disk_reads_done_ = 0;              // the disk tier's finished reads at the last look (prefix loads)
  SteadyTime disk_progress_at_ = {};          // when one last finished, or none was on the way
  Scheduler scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;  // by sequence id
  std::unordered_map<uint64_t, size_t> open_samples_;  // request id -> its unfinished samples (num_samples > 1)
  uint64_t next_id_ = 1;
  MetricsRecorder recorder_;
  KvEvictor evictor_;
  ModelInput input_;  // reused across steps
  std::vector<float> logits_;
  LogitsProcessors logits_processors_;     // makes each request's (JSON mode, structured outputs)
  std::vector<float> constrained_logits_;  // a constrained request's logits, masked
};

}  // namespace kvs
