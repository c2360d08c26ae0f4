// The ranks of a model split over N (--tp N, model/tensor_shard.h), seen from this process: under mpirun this process
// is one rank of the MPI job (rank 0 runs the command, the others serve it); without mpirun the other N - 1 ranks are
// threads of this process, each with its own shard and its share of the threads, serving rank 0's engines until
// rank 0 is done.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/decoder_model.h"
#include "parallel/communicator.h"

namespace kvs {

class TensorParallelRanks {
 public:
  // What an in-process rank serves with: its shard itself (null), or a model made of it for rank r (a GPU's: the
  // shard's weights on the rank's device); an error fails the launch naming it.
  using ShardModel = std::function<Expected<std::unique_ptr<Model>>(const DecoderModel& shard, size_t rank)>;

  // Starts the ranks of the model at `path` split over `n`. `threads`: this process's worker threads; in process it
  // becomes rank 0's share. Errors name the problem (an MPI job of another size, a shard that does not load).
  static Expected<std::unique_ptr<TensorParallelRanks>> launch(const std::string& path, WeightPacking packing, size_t n,
                                                               size_t& threads, const ShardModel& shard_model = {});
  ~TensorParallelRanks();  // rank 0: tells the other ranks it is done; joins the in-process ones

  bool is_root() const { return comms_[0]->rank() == 0; }
  bool mpi() const { return mpi_; }
  Communicator& communicator() { return *comms_[0]; }  // this process's (rank 0's in process)

 private:
  TensorParallelRanks() = default;
  std::vector<std::unique_ptr<Communicator>> comms_;   // [rank] in process; [0] = this process's under MPI
  std::vector<std::unique_ptr<DecoderModel>> shards_;  // in process: ranks 1..N-1 (index 0 unused)
  std::vector<std::unique_ptr<Model>> served_;         // in process: what each serves with, when not its shard
  std::vector<std::unique_ptr<ThreadPool>> pools_;
  std::vector<std::thread> threads_;
  bool mpi_ = false;
};

}  // namespace kvs
