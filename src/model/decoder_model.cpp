#include "model/decoder_model.h"

#include <xxhash.h>

#include <algorithm>

#include "model/deepseek2_forward.h"
#include "model/gemma3_forward.h"
#include "model/llama_forward.h"
#include "model/model_kv_spec.h"

namespace kvs {

Expected<std::unique_ptr<DecoderModel>> DecoderModel::load(const std::string& path, WeightPacking packing,
                                                           Communicator* tp) {
  auto file = gguf::File::open(path);
  if (!file) return file.status();
  auto config = ModelConfig::from_gguf(*file);
  if (!config) return config.status();
  const TensorShard shard{.rank = tp ? tp->rank() : 0, .size = tp ? tp->size() : 1};
  auto ranges = kvs::shard_ranges(*config, shard);
  if (!ranges) return ranges.status();
  auto weights = DecoderWeights::from_gguf(*file, *config, packing, shard.sharded() ? &*ranges : nullptr);
  if (!weights) return weights.status();
  // The weight views point into the mapping, which stays put when the File is moved.
  return std::unique_ptr<DecoderModel>(new DecoderModel(std::move(file).value(), std::move(config).value(),
                                                        std::move(weights).value(), shard, *ranges, tp));
}

uint64_t DecoderModel::file_fingerprint() const {
  const std::span<const std::byte> bytes = file_.bytes();
  const size_t mib = size_t{1} << 20, n = std::min(bytes.size(), mib);
  const uint64_t size = bytes.size();
  return XXH3_64bits_withSeed(bytes.data(), n, size) ^ (XXH3_64bits(bytes.data() + bytes.size() - n, n) * 31);
}

KvCacheSpec DecoderModel::kv_spec(KvDTypes dtype, size_t block_size) const {
  return model_kv_spec(shard_config_, dtype, block_size);
}

std::unique_ptr<ModelRunner> DecoderModel::make_runner(ThreadPool& pool, MlaForm mla_form) const {
  if (config_.is_mla()) return std::make_unique<Deepseek2Forward>(*this, pool, mla_form);
  if (config_.is_gemma3()) return std::make_unique<Gemma3Forward>(*this, pool);
  return std::make_unique<LlamaForward>(*this, pool);
}

}  // namespace kvs
