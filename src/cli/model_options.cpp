#include "cli/model_options.h"

#include <thread>

namespace kvs::cli {

std::string default_model_path() {
#ifdef KVS_DEFAULT_MODEL_PATH
  return KVS_DEFAULT_MODEL_PATH;
#else
  return "models/stories260K.gguf";
#endif
}

void add_model_options(CLI::App& command, ModelOptions& options) {
  command.add_option("-m,--model", options.model_path,
                     "GGUF model file (default: stories260K converted at build time: " + default_model_path() + ")");
  command.add_option("-t,--threads", options.threads, "Worker threads (default: all hardware threads)")
      ->check(CLI::Range(1, 256));
  add_no_repack_flag(command, options.no_repack);
}

void add_no_repack_flag(CLI::App& command, bool& no_repack) {
  command.add_flag(
      "--no-repack", no_repack,
      "Keep Q8_0, Q4_0, Q4_K, Q5_K and Q6_K matrices in the file's layout instead of repacking them at load for the "
      "packed int8 kernels (same values; for A/B measurements)");
}

LoadedModel load_model(const ModelOptions& options) {
  const std::string path = options.model_path.empty() ? default_model_path() : options.model_path;
  auto model = DecoderModel::load(path, options.no_repack ? WeightPacking::kNone : WeightPacking::kForCpu);
  if (!model) throw CommandError(model.status().message());
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  if (!tokenizer) throw CommandError(fmt::format("{}: {}", path, tokenizer.status().message()));
  const size_t threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  return LoadedModel{.model = std::move(model).value(),
                     .tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value()),
                     .pool = std::make_unique<ThreadPool>(threads)};
}

}  // namespace kvs::cli
