// A loaded decoder (Llama family, Gemma 3, DeepSeek-V2): the mapped GGUF file, its config and weight views; its
// runner is the family's forward pass. Under tensor parallelism (a communicator of N > 1 ranks) it is one rank's
// shard (model/tensor_shard.h): config() stays the model's, shard_config() is what this rank computes, and its
// KV spec holds this rank's KV heads only.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/decoder_weights.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/tensor_shard.h"
#include "parallel/communicator.h"

namespace kvs {

class DecoderModel final : public Model {
 public:
  // `tp`: this rank's communicator (null or one rank: the whole model). Not owned; outlives the model.
  static Expected<std::unique_ptr<DecoderModel>> load(const std::string& path,
                                                      WeightPacking packing = WeightPacking::kForCpu,
                                                      Communicator* tp = nullptr);

  const gguf::File& file() const { return file_; }
  const ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_spec(KvDTypes dtype, size_t block_size) const override;
  std::unique_ptr<ModelRunner> make_runner(ThreadPool& pool, MlaForm mla_form = MlaForm::kAuto) const override;
  const DecoderWeights& weights() const { return weights_; }
  size_t tensor_parallel_size() const override { return shard_.size; }
  size_t first_kv_head() const override { return ranges_.kv_first; }
  // XXH3 of the file's size, its first and its last MiB (header, metadata, the first and last tensors' bytes).
  uint64_t file_fingerprint() const override;
  const ModelConfig& shard_config() const { return shard_config_; }
  const ShardRanges& shard_ranges() const { return ranges_; }
  TensorShard shard() const { return shard_; }
  Communicator* communicator() const override { return shard_.sharded() ? tp_ : nullptr; }

 private:
  DecoderModel(gguf::File file, ModelConfig config, DecoderWeights weights, TensorShard shard, ShardRanges ranges,
               Communicator* tp)
      : file_(std::move(file)),
        config_(std::move(config)),
        shard_config_(kvs::shard_config(config_, ranges)),
        weights_(std::move(weights)),
        shard_(shard),
        ranges_(ranges),
        tp_(tp) {}
  gguf::File file_;  // owns the mapping the weight views point into
  ModelConfig config_;
  ModelConfig shard_config_;
  DecoderWeights weights_;
  TensorShard shard_;
  ShardRanges ranges_;
  Communicator* tp_ = nullptr;
};

}  // namespace kvs
