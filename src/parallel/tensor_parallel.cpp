#include "parallel/tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/kv_evictor.h"
#include "parallel/byte_stream.h"
#include "parallel/kv_op_wire.h"

namespace kvs {
namespace {

enum class Message : uint8_t { kStart = 1, kStep = 2, kStop = 3, kEnd = 4 };

// Heavy-hitter policies: the attention mass of a step, one block per sequence that gathers it (in the batch's
// group and sequence order) of num_layers x the model's KV heads x its slot capacity counters. Every rank adds its
// own KV heads' rows (a replicated head's on each of its ranks: their query heads differ); an all-reduce sums them.
// (A sequence that gathers none has capacity 0; a worker reads the shape before it has the buffer.)
size_t slot_mass_size(const SlotMass& m, size_t num_layers) { return num_layers * m.num_kv_heads * m.capacity; }

// A worker's copy of one step's batch: the arrays a ForwardBatch views.
struct DecodedBatch {
  std::vector<TokenId> tokens;
  std::vector<uint32_t> positions, sequence_of_token, visible_slots, logits_for;
  struct Group {
    std::vector<KvSlot> slots;
    std::vector<std::vector<BlockId>> blocks;  // [sequence]
    std::vector<SequenceAttention> sequences;
    std::vector<uint32_t> key_tails;
  };
  std::vector<Group> groups;
  std::vector<KvGroupBatch> group_batches;
  std::vector<uint64_t> slot_mass;  // this step's, zeroed: what this rank's heads add (slot_mass_size blocks)

  // `first_kv_head`: this rank's first of the model's KV heads (its rows of the slot mass).
  ForwardBatch read(ByteReader& in, const KvLayerGroups& layers, size_t num_layers, size_t first_kv_head) {
    in.get_array(tokens);
    in.get_array(positions);
    in.get_array(sequence_of_token);
    in.get_array(visible_slots);
    in.get_array(logits_for);
    groups.resize(in.get<uint64_t>());
    group_batches.clear();
    for (Group& g : groups) {
      in.get_array(g.slots);
      g.blocks.resize(in.get<uint64_t>());
      g.sequences.resize(g.blocks.size());
      for (size_t s = 0; s < g.blocks.size(); ++s) {
        in.get_array(g.blocks[s]);
        g.sequences[s] = {.blocks = g.blocks[s], .num_cached = in.get<uint32_t>(), .window = in.get<uint32_t>()};
        g.sequences[s].slot_mass.capacity = in.get<uint64_t>();
        g.sequences[s].slot_mass.num_kv_heads = in.get<uint64_t>();
      }
      in.get_array(g.key_tails);
      group_batches.push_back({.kv_slots = g.slots,
                               .attention = {.sequences = g.sequences,
                                             .sequence_of_token = sequence_of_token,
                                             .visible_slots = visible_slots,
                                             .key_tails = g.key_tails}});
    }
    // The slot mass buffers, now that their sizes are known; each sequence's view starts at this rank's rows.
    size_t total = 0;
    for (const Group& g : groups)
      for (const SequenceAttention& s : g.sequences) total += slot_mass_size(s.slot_mass, num_layers);
    slot_mass.assign(total, 0);
    size_t at = 0;
    for (Group& g : groups) {
      for (SequenceAttention& s : g.sequences) {
        if (s.slot_mass.capacity == 0) continue;
        s.slot_mass.data = slot_mass.data() + at + first_kv_head * s.slot_mass.capacity;
        at += slot_mass_size(s.slot_mass, num_layers);
      }
    }
    return {.tokens = tokens, .positions = positions, .kv = group_batches, .layers = &layers, .logits_for = logits_for};
  }
};

void write_batch(ByteWriter& out, const ForwardBatch& b) {
  out.put_array(b.tokens);
  out.put_array(b.positions);
  KVS_ASSERT(!b.kv.empty(), "a forward batch without KV groups");
  out.put_array(b.kv[0].attention.sequence_of_token);
  out.put_array(b.kv[0].attention.visible_slots);
  out.put_array(b.logits_for);
  out.put<uint64_t>(b.kv.size());
  for (const KvGroupBatch& g : b.kv) {
    out.put_array(g.kv_slots);
    out.put<uint64_t>(g.attention.sequences.size());
    for (const SequenceAttention& s : g.attention.sequences) {
      out.put_array(s.blocks);
      out.put<uint32_t>(s.num_cached);
      out.put<uint32_t>(s.window);
      out.put<uint64_t>(s.slot_mass ? s.slot_mass.capacity : 0);
      out.put<uint64_t>(s.slot_mass ? s.slot_mass.num_kv_heads : 0);
    }
    out.put_array(g.attention.key_tails);
  }
}

}  // namespace

Status agree_across_ranks(Communicator& comm, const Status& mine, std::string_view what) {
  std::vector<float> failed(comm.size(), 0.0f);
  failed[comm.rank()] = mine.is_ok() ? 0.0f : 1.0f;
  comm.all_reduce_sum(failed);
  std::string ranks;
  size_t first = failed.size();
  for (size_t r = 0; r < failed.size(); ++r) {
    if (failed[r] == 0.0f) continue;
    ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", r);
    first = std::min(first, r);
  }
  if (ranks.empty()) return Status::ok();
  // Every rank reports the first failed rank's reason (a rank's own output may be cut short when the job ends).
  std::vector<std::byte> reason;
  if (comm.rank() == first) {
    const std::string& m = mine.message();
    reason.resize(m.size());
    std::memcpy(reason.data(), m.data(), m.size());
  }
  comm.broadcast(reason, first);
  return Status::unavailable(
      fmt::format("{}: rank {} failed: {}", what, ranks,
                  std::string_view(reinterpret_cast<const char*>(reason.data()), reason.size())));
}

Expected<std::unique_ptr<TensorParallelDriver>> TensorParallelDriver::start(Communicator& comm,
                                                                            const TensorParallelSession* session,
                                                                            uint64_t model_fingerprint,
                                                                            const Status& mine) {
  std::vector<std::byte> message;
  ByteWriter out(message);
  out.put(Message::kStart);
  out.put(model_fingerprint);
  out.put<uint8_t>(session != nullptr);
  if (session) {
    out.put<uint64_t>(session->window);
    out.put<uint8_t>(session->hybrid);
    out.put<uint8_t>(static_cast<uint8_t>(session->mla_form));
    out.put<uint64_t>(session->host_tier_bytes);
    out.put<uint64_t>(session->groups.size());
    for (const KvCacheConfig& g : session->groups) {
      out.put(g.spec);
      out.put<uint64_t>(g.num_blocks);
      out.put<uint64_t>(g.num_key_tails);
    }
  }
  auto driver = std::unique_ptr<TensorParallelDriver>(new TensorParallelDriver(comm));
  out.put(driver->id());
  comm.broadcast(message, 0);
  KVS_RETURN_IF_ERROR(agree_across_ranks(comm, mine, "tensor-parallel start"));
  return driver;
}

void TensorParallelDriver::end_all(Communicator& comm) {
  std::vector<std::byte> message;
  ByteWriter(message).put(Message::kEnd);
  comm.broadcast(message, 0);
}

void TensorParallelDriver::forward(const ForwardBatch& batch) {
  message_.clear();
  ByteWriter out(message_);
  out.put(Message::kStep);
  out.put(id());
  write_kv_ops(out, ops_);
  write_batch(out, batch);
  comm_.broadcast(message_, 0);
  ops_.clear();
}

void TensorParallelDriver::add_scores(const ForwardBatch& batch) {
  const size_t num_layers = batch.layers->num_layers();
  size_t total = 0;
  for (const KvGroupBatch& g : batch.kv)
    for (const SequenceAttention& s : g.attention.sequences) total += slot_mass_size(s.slot_mass, num_layers);
  if (total == 0) return;    // the workers skip it too
  scores_.assign(total, 0);  // rank 0's heads added theirs in place: the others' come back in the sum
  comm_.all_reduce_sum(std::span<uint64_t>(scores_));
  size_t at = 0;
  for (const KvGroupBatch& g : batch.kv) {
    for (const SequenceAttention& s : g.attention.sequences) {
      const size_t n = slot_mass_size(s.slot_mass, num_layers);
      for (size_t i = 0; i < n; ++i) s.slot_mass.data[i] += scores_[at + i];
      at += n;
    }
  }
}

void TensorParallelDriver::stop() {
  if (stopped_) return;
  stopped_ = true;
  message_.clear();
  ByteWriter out(message_);
  out.put(Message::kStop);
  out.put(id());
  comm_.broadcast(message_, 0);
}

namespace {

// One engine's life on a worker rank: the pools rank 0's start message describes and this rank's runner over them.
class WorkerSession {
 public:
  // Reads rank 0's start message (after its kind); what this rank finds wrong with it, before every rank agrees.
  Status read_start(const Model& shard, const Communicator& comm, ByteReader& start) {
    Status mine = Status::ok();
    if (start.get<uint64_t>() != shard.file_fingerprint()) {
      mine = Status::invalid_argument(fmt::format(
          "rank {}'s model file differs from rank 0's (another file, or another version of it)", comm.rank()));
    }
    if (start.get<uint8_t>() == 0) return mine;  // rank 0 failed to start (it says why)
    const auto window = start.get<uint64_t>();
    const bool hybrid = start.get<uint8_t>() != 0;
    mla_form_ = static_cast<MlaForm>(start.get<uint8_t>());
    host_tier_bytes_ = start.get<uint64_t>();
    const ModelConfig& c = shard.config();
    layers_ = KvLayerGroups::make(c.num_layers, c.layer_windows, window, hybrid);
    groups_.resize(start.get<uint64_t>());
    for (KvCacheConfig& g : groups_) {
      g.spec = start.get<KvCacheSpec>();
      g.num_blocks = start.get<uint64_t>();
      g.num_key_tails = start.get<uint64_t>();
    }
    if (mine.is_ok() && (groups_.size() != layers_.groups.size() ||
                         (!groups_.empty() && groups_[0].spec.num_kv_heads != shard.kv_spec({}, 1).num_kv_heads))) {
      mine = Status::invalid_argument(
          fmt::format("rank {}'s shard does not hold the KV heads rank 0's pools are made for", comm.rank()));
    }
    return mine;
  }

  // After every rank agreed to start: the storages and the runner.
  // The pools in the model's memory (a GPU's, through its allocator) and its executor over them, as Engine makes them.
  void open(const Model& shard, ThreadPool& pool) {
    for (const KvCacheConfig& g : groups_) {
      if (KvAllocator* allocator = shard.kv_allocator()) {
        storages_.emplace_back(g.spec, g.num_blocks, g.num_key_tails, *allocator);
      } else {
        storages_.emplace_back(g.spec, g.num_blocks, g.num_key_tails);
      }
    }
    runner_ = shard.make_runner(pool, mla_form_);
    auto host = std::make_unique<HostKvExecutor>(storages_, model_kv_head_share(shard),
                                                 model_key_rotation(shard.config()), clock_);
    executor_ = shard.make_kv_executor(storages_, std::move(host));
    if (host_tier_bytes_ > 0) {
      host_slabs_ = std::make_unique<HostSlabs>(host_tier_bytes_, shard.kv_host_tier_allocator());
      executor_->attach_tiers(host_slabs_.get(), nullptr);
    }
  }

  // One step's message (after its kind and session): the KV operations, then the forward pass, then the step's
  // attention mass summed to rank 0 when a sequence gathers it.
  void step(const Model& shard, Communicator& comm, ByteReader& in) {
    read_kv_ops(in, ops_);
    const auto applied = executor_->apply(ops_);
    KVS_ASSERT(applied.has_value(), "rank {}: {}", comm.rank(), applied.status().message());
    runner_->forward(batch_.read(in, layers_, shard.config().num_layers, shard.first_kv_head()), storages_, {});
    if (!batch_.slot_mass.empty()) comm.all_reduce_sum(std::span<uint64_t>(batch_.slot_mass));
  }

 private:
  std::vector<KvCacheConfig> groups_;
  KvLayerGroups layers_;
  MlaForm mla_form_ = MlaForm::kAuto;
  std::vector<KvStorage> storages_;
  std::unique_ptr<ModelRunner> runner_;
  size_t host_tier_bytes_ = 0;
  std::unique_ptr<HostSlabs> host_slabs_;  // rank 0's host tier slots, this rank's heads
  SteadyClock clock_;                      // times the tier moves (a worker's measurements are not read)
  std::unique_ptr<KvExecutor> executor_;
  std::vector<KvOp> ops_;
  DecodedBatch batch_;
};

}  // namespace

Status run_tensor_parallel_worker(const Model& shard, ThreadPool& pool, Communicator& comm) {
  Status last = Status::ok();
  std::map<uint64_t, std::unique_ptr<WorkerSession>> sessions;  // rank 0's engines now open, by driver id
  std::vector<std::byte> message;
  for (;;) {
    comm.broadcast(message, 0);
    ByteReader in(message);
    const auto kind = in.get<Message>();
    if (kind == Message::kEnd) return last;
    if (kind == Message::kStart) {
      auto session = std::make_unique<WorkerSession>();
      const Status mine = session->read_start(shard, comm, in);
      const auto id = in.get<uint64_t>();
      // An engine that failed to start is said on rank 0 too.
      last = agree_across_ranks(comm, mine, "tensor-parallel start");
      if (!last) continue;
      session->open(shard, pool);
      sessions[id] = std::move(session);
    } else if (kind == Message::kStep) {
      sessions.at(in.get<uint64_t>())->step(shard, comm, in);
    } else {
      sessions.erase(in.get<uint64_t>());  // the engine on rank 0 closed
    }
  }
}

}  // namespace kvs
