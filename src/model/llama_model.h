// A loaded Llama-family model: the mapped GGUF file, its config and weight views.
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/llama_weights.h"
#include "model/model.h"
#include "model/model_config.h"

namespace kvs {

class LlamaModel final : public Model {
 public:
  static Expected<std::unique_ptr<LlamaModel>> load(const std::string& path,
                                                    WeightPacking packing = WeightPacking::kForCpu);

  const gguf::File& file() const { return file_; }
  const ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_spec(KvDTypes dtype, size_t block_size) const override;
  std::unique_ptr<ModelRunner> make_runner(ThreadPool& pool) const override;
  const LlamaWeights& weights() const { return weights_; }

 private:
  LlamaModel(gguf::File file, ModelConfig config, LlamaWeights weights)
      : file_(std::move(file)), config_(std::move(config)), weights_(std::move(weights)) {}
  gguf::File file_;  // owns the mapping the weight views point into
  ModelConfig config_;
  LlamaWeights weights_;
};

}  // namespace kvs
