// N ranks as N threads of one process (tensor parallelism without mpirun): InProcessGroup::make(n) gives one
// communicator per rank, each to be used from its own thread. Collectives meet at a barrier (threads sleep
// there, never spin); an all-reduce splits the vector into N slices, each rank adds its slice over every
// rank's buffer in rank order, then every rank copies the whole sum: each element is added once, in the same
// order, so every rank gets the same bits (as a ring all-reduce does).
#pragma once

#include <barrier>
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace kvs {

class InProcessGroup {
 public:
  // The communicators of a group of n ranks (n >= 1), rank i at index i; the group lives as long as any of them.
  static std::vector<std::unique_ptr<Communicator>> make(size_t n);

  // Shared by the ranks' communicators: what each rank put up for the collective under way.
  struct State {
    explicit State(size_t n) : size(n), barrier(static_cast<std::ptrdiff_t>(n)), floats(n), integers(n), bytes(n) {}
    size_t size;
    std::barrier<> barrier;
    std::vector<std::span<float>> floats;        // [rank]: its all-reduce buffer or gather input
    std::vector<std::span<uint64_t>> integers;   // [rank]: its integer all-reduce buffer
    std::vector<std::vector<std::byte>*> bytes;  // [rank]: its broadcast buffer
    std::vector<float> sum;                      // the all-reduce's result, one slice per rank
    std::vector<uint64_t> integer_sum;
  };
};

}  // namespace kvs
