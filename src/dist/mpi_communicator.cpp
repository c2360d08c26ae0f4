#include "dist/mpi_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#ifdef KVS_HAVE_MPI
#include <mpi.h>
#endif

namespace kvs {

bool launched_by_mpi() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr; }

#ifdef KVS_HAVE_MPI
namespace {

void wait_sleeping(MPI_Request& request) {
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::microseconds(200);
  auto nap = std::chrono::microseconds(20);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (Clock::now() < spin_until) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(2 * nap, std::chrono::milliseconds(1));
  }
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rank_ = static_cast<size_t>(rank);
    size_ = static_cast<size_t>(size);
  }
  ~MpiCommunicator() override { MPI_Finalize(); }
  size_t rank() const override { return rank_; }
  size_t size() const override { return size_; }

  void all_reduce_sum(std::span<float> data) override {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }

  // The size goes first, and it is where a worker waits for rank 0's next step, for as long as rank 0 has nothing to
  // run (an idle server): a blocking MPI_Bcast polls at 100% of a core meanwhile, so the wait polls for 200 us
  // (a step's message arrives well within it while requests run) and then sleeps between polls, up to 1 ms.
  void broadcast(std::vector<std::byte>& bytes, size_t root) override {
    uint64_t n = bytes.size();
    MPI_Request request;
    MPI_Ibcast(&n, 1, MPI_UINT64_T, static_cast<int>(root), MPI_COMM_WORLD, &request);
    wait_sleeping(request);
    bytes.resize(n);
    MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_BYTE, static_cast<int>(root), MPI_COMM_WORLD);
  }

  void gather(std::span<const float> in, std::span<float> out, size_t root) override {
    const int count = static_cast<int>(in.size());
    const bool at_root = rank_ == root;
    counts_.resize(size_);
    displacements_.resize(size_);
    MPI_Gather(&count, 1, MPI_INT, counts_.data(), 1, MPI_INT, static_cast<int>(root), MPI_COMM_WORLD);
    if (at_root) {
      for (size_t r = 0, at = 0; r < size_; ++r) {
        displacements_[r] = static_cast<int>(at);
        at += static_cast<size_t>(counts_[r]);
      }
    }
    MPI_Gatherv(in.data(), count, MPI_FLOAT, at_root ? out.data() : nullptr, counts_.data(), displacements_.data(),
                MPI_FLOAT, static_cast<int>(root), MPI_COMM_WORLD);
  }

 private:
  size_t rank_ = 0, size_ = 1;
  std::vector<int> counts_, displacements_;
};

}  // namespace

bool mpi_available() { return true; }

void mpi_abort_job(const std::string& what) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fmt::print(stderr, "kvserve: rank {}: {}; stopping every rank\n", rank, what);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

Expected<std::unique_ptr<Communicator>> mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::invalid_argument("MPI is initialized already: one MPI communicator per process");
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return Status::unavailable("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Status::unavailable(
        fmt::format("this MPI gives thread level {}, below MPI_THREAD_SERIALIZED (the server steps the engine on a "
                    "thread of its own)",
                    provided));
  }
  return std::unique_ptr<Communicator>(new MpiCommunicator());
}

#else

bool mpi_available() { return false; }

void mpi_abort_job(const std::string& what) {
  fmt::print(stderr, "kvserve: {}\n", what);
  std::abort();
}

Expected<std::unique_ptr<Communicator>> mpi_world() {
  return Status::unimplemented(
      "this kvserve was built without MPI: install OpenMPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild");
}

#endif

}  // namespace kvs
