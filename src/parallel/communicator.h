// The collective operations tensor parallelism needs, over the N ranks of one job: an all-reduce of float
// sums (after each row-parallel projection; of integers for attention scores), a broadcast of bytes from one rank (the
// step's batch), and a gather of floats to one rank (the logits' vocabulary slices). Every rank calls the same
// operations in the same order. Two implementations: in-process (one thread per rank: tests and single-machine users,
// parallel/in_process_communicator.h) and MPI (parallel/mpi_communicator.h, under mpirun).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvs {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual size_t rank() const = 0;
  virtual size_t size() const = 0;
  // data <- the elementwise sum of every rank's data (the same length on each); every rank gets the same bits.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // The same over integers (exact: attention-score counters, kv/policies/slot_scores.h).
  virtual void all_reduce_sum(std::span<uint64_t> data) = 0;
  // Every rank's `bytes` <- rank root's (resized to its length).
  virtual void broadcast(std::vector<std::byte>& bytes, size_t root) = 0;
  // At root: out = every rank's `in` (lengths may differ), one after another in rank order; `out` (at least their
  // total) is not used elsewhere.
  virtual void gather(std::span<const float> in, std::span<float> out, size_t root) = 0;
};

// One rank alone: every operation is a copy (or nothing).
class SingleRankCommunicator final : public Communicator {
 public:
  size_t rank() const override { return 0; }
  size_t size() const override { return 1; }
  void all_reduce_sum(std::span<float>) override {}
  void all_reduce_sum(std::span<uint64_t>) override {}
  void broadcast(std::vector<std::byte>&, size_t) override {}
  void gather(std::span<const float> in, std::span<float> out, size_t) override;
};

}  // namespace kvs
