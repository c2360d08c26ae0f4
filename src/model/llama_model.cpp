#include "model/llama_model.h"

namespace kvs {

Expected<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path, WeightPacking packing) {
  auto file = gguf::File::open(path);
  if (!file) return file.status();
  auto config = ModelConfig::from_gguf(*file);
  if (!config) return config.status();
  auto weights = LlamaWeights::from_gguf(*file, *config, packing);
  if (!weights) return weights.status();
  // The weight views point into the mapping, which stays put when the File is moved.
  return std::unique_ptr<LlamaModel>(
      new LlamaModel(std::move(file).value(), std::move(config).value(), std::move(weights).value()));
}

}  // namespace kvs
