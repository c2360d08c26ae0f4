// Flags every model-running subcommand shares (-m, --threads, --tp) and loading the model they name. With --tp N
// the model is split over N ranks (parallel/rank_launcher.h).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/decoder_model.h"
#include "parallel/communicator.h"
#include "parallel/rank_launcher.h"
#include "tokenizer/tokenizer.h"

namespace kvs::cli {

struct ModelOptions {
  std::string model_path;      // empty: the default model built with kvserve
  size_t threads = 0;          // 0: every hardware thread
  bool no_repack = false;      // keep Q8_0 matrices in the file's layout (WeightPacking::kNone)
  size_t tp = 1;               // --tp: ranks the model is split over
  std::string device = "cpu";  // --device cpu | vulkan[:N]
  bool profile = false;        // --profile: the GPU's time per shader kind
};

void add_model_options(CLI::App& command, ModelOptions& options);
void add_no_repack_flag(CLI::App& command, bool& no_repack);
void add_tensor_parallel_option(CLI::App& command, size_t& tp);

struct LoadedModel {
  std::unique_ptr<TensorParallelRanks> tp;  // --tp > 1 (first: the model's communicator lives in it)
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
  double load_seconds = 0.0;   // opening the file, checking it, repacking its matrices and reading the tokenizer
  std::unique_ptr<Model> gpu;  // --device vulkan: the model on the GPU (its weights uploaded), over `model`

  // What engines run: the GPU's model under --device vulkan, else the loaded one.
  const Model& engine_model() const { return gpu ? *gpu : static_cast<const Model&>(*model); }
};
// Throws CommandError with the loader's message (file, problem, value) on failure.
LoadedModel load_model(const ModelOptions& options);
// --device: nullopt for cpu, else the Vulkan device index; throws CommandError naming a value it cannot read.
std::optional<size_t> vulkan_device(const std::string& device);
// Tensor parallelism: false on rank 0 (the command goes on; its engines run with the other ranks); true on an MPI
// rank above 0, after it served rank 0's engines until rank 0 finished (the command returns). False without --tp.
bool serve_unless_root(LoadedModel& loaded);

std::string default_model_path();

// Under --device vulkan, the start-up line (stderr): weights, activations and the KV pool in the device's memory.
void print_gpu_memory_line(const LoadedModel& loaded, const Engine& engine, const EngineConfig& config);
// Under --profile, the GPU's time per shader kind (stderr).
void print_gpu_profile(const LoadedModel& loaded);

}  // namespace kvs::cli
