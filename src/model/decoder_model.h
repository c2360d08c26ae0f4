// A loaded decoder (Llama family, Gemma 3, DeepSeek-V2): the mapped GGUF file, its config and weight views; its
// runner is the family's forward pass.
#pragma once

#include <memory>
#include <string>

#include "model/decoder_weights.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/moe_ffn.h"

namespace kvs {

class DecoderModel final : public Model {
 public:
  // mla_form: how an MLA model's runners attend (ignored by other families).
  static Expected<std::unique_ptr<DecoderModel>> load(const std::string& path,
                                                      WeightPacking packing = WeightPacking::kForCpu,
                                                      MlaForm mla_form = MlaForm::kAuto);

  const gguf::File& file() const { return file_; }
  const ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_spec(KvDTypes dtype, size_t block_size) const override;
  std::unique_ptr<ModelRunner> make_runner(ThreadPool& pool) const override;
  const DecoderWeights& weights() const { return weights_; }

 private:
  DecoderModel(gguf::File file, ModelConfig config, DecoderWeights weights, MlaForm mla_form)
      : file_(std::move(file)), config_(std::move(config)), weights_(std::move(weights)), mla_form_(mla_form) {}
  gguf::File file_;  // owns the mapping the weight views point into
  ModelConfig config_;
  DecoderWeights weights_;
  MlaForm mla_form_;
};

}  // namespace kvs
