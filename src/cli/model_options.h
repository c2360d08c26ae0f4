// Flags every model-running subcommand shares (-m, --threads, --tp) and loading the model they name. With --tp N
// the model is split over N ranks (model/tensor_shard.h): under mpirun this process is one rank of the MPI job
// (rank 0 runs the command, the others serve it); without mpirun the other N - 1 ranks are threads of this process.
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
#include "tokenizer/tokenizer.h"

namespace kvs::cli {

struct ModelOptions {
  std::string model_path;  // empty: the default model built with kvserve
  size_t threads = 0;      // 0: every hardware thread
  bool no_repack = false;  // keep Q8_0 matrices in the file's layout (WeightPacking::kNone)
  size_t tp = 1;           // --tp: ranks the model is split over
};

// The ranks of a model split by --tp, seen from this process.
class TensorParallelRanks {
 public:
  ~TensorParallelRanks();  // rank 0: tells the other ranks it is done; joins the in-process ones

  bool is_root() const;

  // Set up by load_model.
  std::vector<std::unique_ptr<Communicator>> comms_;   // [rank] in process; [0] = this process's under MPI
  std::vector<std::unique_ptr<DecoderModel>> shards_;  // in process: ranks 1..N-1 (index 0 unused)
  std::vector<std::unique_ptr<ThreadPool>> pools_;
  std::vector<std::thread> threads_;
  bool mpi_ = false;
};

void add_model_options(CLI::App& command, ModelOptions& options);
void add_no_repack_flag(CLI::App& command, bool& no_repack);
void add_tensor_parallel_option(CLI::App& command, size_t& tp);

struct LoadedModel {
  std::unique_ptr<TensorParallelRanks> tp;  // --tp > 1 (first: the model's communicator lives in it)
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
};
// Throws CommandError with the loader's message (file, problem, value) on failure.
LoadedModel load_model(const ModelOptions& options);
// Tensor parallelism: false on rank 0 (the command goes on; its engines run with the other ranks); true on an MPI
// rank above 0, after it served rank 0's engines until rank 0 finished (the command returns). False without --tp.
bool serve_unless_root(LoadedModel& loaded);

std::string default_model_path();

}  // namespace kvs::cli
