// What the engine knows of a model: its config, what its KV cache holds per token and layer, and a
// runner that computes a forward pass over a batch. One implementation per family (llama.h today;
// MLA and others later); the engine never names a family.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>

#include "core/thread_pool.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_ops.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "parallel/communicator.h"

namespace kvs {

// How a forward pass of an MLA model attends (model/deepseek2_forward.h): over the latent rows with the K/V
// up-projections absorbed, over per-head K/V expanded from them, or per sequence by the tokens it brings to a step
// (auto). Other families ignore it.
enum class MlaForm { kAuto, kAbsorbed, kExpanded };
// Under MlaForm::kAuto a sequence attends in expanded form when it brings at least this many tokens to a step
// (measured: docs/MLA.md).
inline constexpr size_t kMlaExpandFromTokens = 96;
inline std::string_view mla_form_name(MlaForm form) {
  return form == MlaForm::kAbsorbed ? "absorbed" : form == MlaForm::kExpanded ? "expanded" : "auto";
}
inline std::optional<MlaForm> mla_form_from_name(std::string_view name) {
  for (MlaForm f : {MlaForm::kAuto, MlaForm::kAbsorbed, MlaForm::kExpanded})
    if (mla_form_name(f) == name) return f;
  return std::nullopt;
}

// A forward pass that failed on its device (out of the device's memory for a step, a lost device): the step's
// tokens were not computed (its K/V writes may be half done in their own slots). The engine ends the step's requests
// with FinishReason::kDeviceError and the message, and goes on with the others.
class DeviceFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One forward pass at a time, with its own scratch buffers (one per engine).
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  // Writes each token's K/V into its slot of each layer group's storage (kv[group], of the group's layers),
  // reads what each group's attention batch says, and fills logits: [batch.logits_for.size()][vocab_size].
  // Throws DeviceFault when its device fails.
  virtual void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) = 0;
  // Tensor parallelism: seconds spent in the ranks' collectives (all-reduces, the logits gather), and how many,
  // since the runner was made (waiting for the slowest rank included).
  virtual double communication_seconds() const { return 0.0; }
  virtual uint64_t num_collectives() const { return 0; }
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // The KV cache this model needs, in `dtype` elements (K and V each) and blocks of `block_size` tokens.
  virtual KvCacheSpec kv_spec(KvDTypes dtype, size_t block_size) const = 0;
  // Ranks the model is split over (tensor parallelism; model/tensor_shard.h): 1 for a whole model.
  virtual size_t tensor_parallel_size() const { return 1; }
  // The first of the model's KV heads this rank holds (its KV head h is the model's first_kv_head() + h): 0 whole.
  virtual size_t first_kv_head() const { return 0; }
  // Identifies the model's file (ranks of a split model compare theirs at start); 0 when unknown.
  virtual uint64_t file_fingerprint() const { return 0; }
  // The ranks' communicator when split (tensor_parallel_size() > 1), else null.
  virtual Communicator* communicator() const { return nullptr; }
  // A runner over `pool`; the model must outlive it.
  virtual std::unique_ptr<ModelRunner> make_runner(ThreadPool& pool, MlaForm mla_form = MlaForm::kAuto) const = 0;
  // Where its runner wants the KV bytes (a GPU's mapped memory); null: host RAM. The model outlives the storages.
  virtual KvAllocator* kv_allocator() const { return nullptr; }
  // Where the host tier's blocks should live (kv/tiers/host_slabs.h): host memory its executor copies blocks to and
  // from by the device's own transfers (pinned, device-visible); null: plain host RAM.
  virtual KvAllocator* kv_host_tier_allocator() const { return nullptr; }
  // The executor of the KV op log over `storages` (from kv_allocator()): `host` (the host's, over the storages'
  // bytes) by default; a device's applies what it can itself and hands the rest to `host`. Both outlive nothing of
  // the model's but the storages.
  virtual std::unique_ptr<KvExecutor> make_kv_executor(std::span<KvStorage> storages,
                                                       std::unique_ptr<KvExecutor> host) const {
    (void)storages;
    return host;
  }
  // Whether its runner computes attention over a cache of `spec` with a window of `window` slots (0: none) and an
  // eviction policy (evicts): an error naming what it does not, checked when an engine is made. The CPU runs all.
  virtual Status supports_kv(const KvCacheSpec& spec, size_t window, bool evicts) const { return Status::ok(); }
};

}  // namespace kvs
