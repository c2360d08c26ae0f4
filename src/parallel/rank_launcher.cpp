#include "parallel/rank_launcher.h"

#include <fmt/format.h>

#include <algorithm>

#include "parallel/in_process_communicator.h"
#include "parallel/mpi_communicator.h"
#include "parallel/tensor_parallel.h"

namespace kvs {

Expected<std::unique_ptr<TensorParallelRanks>> TensorParallelRanks::launch(const std::string& path,
                                                                           WeightPacking packing, size_t n,
                                                                           size_t& threads,
                                                                           const ShardModel& shard_model) {
  auto ranks = std::unique_ptr<TensorParallelRanks>(new TensorParallelRanks());
  TensorParallelRanks& tp = *ranks;
  if (launched_by_mpi()) {
    auto world = mpi_world();
    if (!world) return Status::unavailable(fmt::format("--tp {}: {}", n, world.status().message()));
    if ((*world)->size() != n) {
      return Status::invalid_argument(
          fmt::format("--tp {} but mpirun started {} ranks: give mpirun -np {}", n, (*world)->size(), n));
    }
    tp.mpi_ = true;
    tp.comms_.push_back(std::move(world).value());
    return ranks;
  }
  tp.comms_ = InProcessGroup::make(n);
  for (size_t r = 1; r < n; ++r) {  // the other ranks' shards, each with its share of the threads
    auto shard = DecoderModel::load(path, packing, tp.comms_[r].get());
    if (!shard) return shard.status();
    tp.shards_.resize(r);
    tp.shards_.push_back(std::move(shard).value());
    tp.pools_.resize(r);
    tp.pools_.push_back(std::make_unique<ThreadPool>(std::max<size_t>(1, threads / n)));
    tp.served_.resize(r + 1);
    if (shard_model) {
      auto model = shard_model(*tp.shards_[r], r);
      if (!model) return model.status();
      tp.served_[r] = std::move(model).value();
    }
  }
  for (size_t r = 1; r < n; ++r) {  // they serve rank 0's engines until it is done
    tp.threads_.emplace_back([&tp, r] {
      const Model& model = tp.served_[r] ? *tp.served_[r] : static_cast<const Model&>(*tp.shards_[r]);
      const Status s = run_tensor_parallel_worker(model, *tp.pools_[r], *tp.comms_[r]);
      (void)s;  // a failed start is reported on rank 0, which agreed on it
    });
  }
  threads = std::max<size_t>(1, threads / n);
  return ranks;
}

TensorParallelRanks::~TensorParallelRanks() {
  // Only ranks that serve can hear it (in process: none when a shard failed to load before they started).
  if (!comms_.empty() && is_root() && (mpi_ || !threads_.empty())) TensorParallelDriver::end_all(*comms_[0]);
  for (std::thread& t : threads_) t.join();
}

}  // namespace kvs
