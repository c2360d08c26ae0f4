#include "engine/engine_config.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvs {

Status EngineConfig::validate() const {
  if (max_batch_tokens == 0) return Status::invalid_argument("max batch tokens must be positive, got 0");
  if (max_seqs == 0) return Status::invalid_argument("max seqs must be positive, got 0");
  FeatureSet f;
  f.add(Feature::kKvMemory, kv.memory_bytes > 0)
      .add(Feature::kKvBlocks, kv.blocks > 0)
      .add(Feature::kSwapPreemption, kv_preempt == KvPreemptMode::kSwap, "--kv-preempt swap")
      .add(Feature::kNoHostTier, kv.tiers.host_bytes == 0)
      .add(Feature::kKvWindow, kv.window > 0, fmt::format("a KV window ({} tokens)", kv.window))
      .add(Feature::kContiguousLayout, kv.layout == KvLayout::kContiguous)
      .add(Feature::kOffloadTiers, kv.tiers.enabled())
      .add(Feature::kDiskTier, !kv.tiers.disk_directory.empty())
      .add(Feature::kNoPrefixCache, !kv.prefix_caching);
  return check_features(f);
}

FeatureSet engine_features(const Model& model, const EngineConfig& config, const KvPolicyParams& policy) {
  const ModelConfig& c = model.config();
  const bool paged = config.kv.layout == KvLayout::kPaged;
  const bool model_windows = std::ranges::any_of(c.layer_windows, [](uint32_t w) { return w > 0; });
  const KvCacheSpec spec = engine_kv_spec(model, config);
  const KvTensorFormat keys = spec.validate() ? kv_format(spec).k : KvTensorFormat{};
  const Communicator* comm = model.communicator();
  FeatureSet f;
  f.add(Feature::kMlaCache, c.is_mla())
      .add(Feature::kKvWindow, config.kv.window > 0, fmt::format("a KV window ({} tokens)", config.kv.window))
      .add(Feature::kModelWindows, model_windows)
      .add(Feature::kWindowPools, model_windows && config.kv.hybrid && paged)
      .add(Feature::kContiguousLayout, !paged)
      .add(Feature::kEvictionPolicy, policy.evicts(), fmt::format("the KV policy {}", policy.describe()))
      .add(Feature::kPerChannelKeys, keys.scale_axis == KvScaleAxis::kPerChannel,
           fmt::format("{} keys quantized per channel", kv_dtype_name(keys.element)))
      .add(Feature::kOffloadTiers, config.kv.tiers.enabled())
      .add(Feature::kDiskTier, !config.kv.tiers.disk_directory.empty())
      .add(Feature::kNoPrefixCache, !config.kv.prefix_caching)
      .add(Feature::kTensorParallel, comm != nullptr && comm->size() > 1,
           comm ? fmt::format("tensor parallelism (--tp {})", comm->size()) : std::string());
  return f;
}

size_t engine_block_size(const Model& model, const EngineConfig& config) {
  return config.kv.layout == KvLayout::kContiguous ? model.config().context_length : config.kv.block_size;
}

KvCacheSpec engine_kv_spec(const Model& model, const EngineConfig& config) {
  KvCacheSpec spec = model.kv_spec(config.kv.dtype, engine_block_size(model, config));
  spec.contiguous = config.kv.layout == KvLayout::kContiguous;
  spec.key_scale_axis = config.kv.key_scales;
  spec.rotate_keys = config.kv.rotate_keys;
  return spec;
}

Expected<EngineKvLayout> engine_kv_layout(const Model& model, const EngineConfig& config) {
  KVS_RETURN_IF_ERROR(config.validate());
  const ModelConfig& c = model.config();
  KVS_RETURN_IF_ERROR(engine_kv_spec(model, config).validate());
  KVS_RETURN_IF_ERROR(
      check_features(engine_features(model, config, config.kv.policy.resolved(engine_block_size(model, config)))));
  return kv_pool_layout(
      {.spec = engine_kv_spec(model, config),
       .context_length = c.context_length,
       .layer_windows = c.layer_windows,
       .identity = fmt::format("{}/{}/{}x{}/{}", c.architecture, c.name, c.num_layers, c.dim, c.vocab_size)},
      {.max_seqs = config.max_seqs, .max_batch_tokens = config.max_batch_tokens, .kv = config.kv});
}

}  // namespace kvs
