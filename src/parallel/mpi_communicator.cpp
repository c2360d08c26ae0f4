#include "parallel/mpi_communicator.h"

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

// Broadcasts travel as point-to-point messages of this tag (MPI keeps their order from one sender), so that a
// receiver can wait for one without polling a core (probe_sleeping).
constexpr int kBroadcastTag = 17;

// Waits for the next broadcast message from `root`: where a worker waits for rank 0's next step, for as long as
// rank 0 has nothing to run (an idle server). A blocking MPI_Bcast polls at 100% of a core meanwhile; this polls for
// 2 ms (while requests run the next step comes within it) and then sleeps between polls, up to 1 ms.
MPI_Message probe_sleeping(int root, MPI_Status& status) {
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::milliseconds(2);
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    int found = 0;
    MPI_Message message;
    MPI_Improbe(root, kBroadcastTag, MPI_COMM_WORLD, &found, &message, &status);
    if (found) return message;
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
  void all_reduce_sum(std::span<uint64_t> data) override {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  }

  // The root sends the bytes to every other rank; each receives a message of whatever size it is.
  void broadcast(std::vector<std::byte>& bytes, size_t root) override {
    if (rank_ == root) {
      for (size_t r = 0; r < size_; ++r) {
        if (r == root) continue;
        MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, static_cast<int>(r), kBroadcastTag,
                 MPI_COMM_WORLD);
      }
      return;
    }
    MPI_Status status;
    MPI_Message message = probe_sleeping(static_cast<int>(root), status);
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    bytes.resize(static_cast<size_t>(count));
    MPI_Mrecv(bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
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
