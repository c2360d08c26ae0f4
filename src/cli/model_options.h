// Flags every model-running subcommand shares (-m, --threads) and loading the model they name.
#pragma once

#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/thread_pool.h"
#include "model/decoder_model.h"
#include "tokenizer/tokenizer.h"

namespace kvs::cli {

struct ModelOptions {
  std::string model_path;  // empty: the default model built with kvserve
  size_t threads = 0;      // 0: every hardware thread
  bool no_repack = false;  // keep Q8_0 matrices in the file's layout (WeightPacking::kNone)
};

void add_model_options(CLI::App& command, ModelOptions& options);
void add_no_repack_flag(CLI::App& command, bool& no_repack);

struct LoadedModel {
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
};
// Throws CommandError with the loader's message (file, problem, value) on failure.
LoadedModel load_model(const ModelOptions& options);

std::string default_model_path();

}  // namespace kvs::cli
