// A loaded decoder (Llama family, Gemma 3, DeepSeek-V2): the mapped GGUF file, its config and weight views; its
// runner is the family's forward pass.
#pragma once

#include <memory>
#include <string>

#include "model/decoder_weights.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_config.h"

namespace kvs {

class DecoderModel final : public Model {
 public:
  static Expected<std::unique_ptr<DecoderModel>> load(const std::string& path,
                                                      WeightPacking packing = WeightPacking::kForCpu);

  const gguf::File& file() const { return file_; }
  const ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_spec(KvDTypes dtype, size_t block_size) const override;
  std::unique_ptr<ModelRunner> make_runner(ThreadPool& pool, MlaForm mla_form = MlaForm::kAuto) const override;
  const DecoderWeights& weights() const { return weights_; }

 private:
  DecoderModel(gguf::File file, ModelConfig config, DecoderWeights weights)
      : file_(std::move(file)), config_(std::move(config)), weights_(std::move(weights)) {}
  gguf::File file_;  // owns the mapping the weight views point into
  ModelConfig config_;
  DecoderWeights weights_;
};

}  // namespace kvs
