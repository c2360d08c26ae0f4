#include "parallel/in_process_communicator.h"

#include <algorithm>
#include <cstring>

#include "core/status.h"

namespace kvs {
namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup::State> state, size_t rank)
      : state_(std::move(state)), rank_(rank) {}
  size_t rank() const override { return rank_; }
  size_t size() const override { return state_->size; }

  void all_reduce_sum(std::span<float> data) override { all_reduce(data, state_->floats, state_->sum); }
  void all_reduce_sum(std::span<uint64_t> data) override { all_reduce(data, state_->integers, state_->integer_sum); }

  void broadcast(std::vector<std::byte>& bytes, size_t root) override {
    InProcessGroup::State& s = *state_;
    s.bytes[rank_] = &bytes;
    s.barrier.arrive_and_wait();
    if (rank_ != root) *s.bytes[rank_] = *s.bytes[root];
    s.barrier.arrive_and_wait();
  }

  void gather(std::span<const float> in, std::span<float> out, size_t root) override {
    InProcessGroup::State& s = *state_;
    s.floats[rank_] = {const_cast<float*>(in.data()), in.size()};  // read only by the root
    s.barrier.arrive_and_wait();
    if (rank_ == root) {
      size_t at = 0;
      for (size_t r = 0; r < s.size; ++r) {
        KVS_ASSERT(at + s.floats[r].size() <= out.size(), "gather of {} floats into {}", at + s.floats[r].size(),
                   out.size());
        std::copy(s.floats[r].begin(), s.floats[r].end(), out.begin() + static_cast<std::ptrdiff_t>(at));
        at += s.floats[r].size();
      }
    }
    s.barrier.arrive_and_wait();
  }

 private:
  // Each rank sums its slice of the elements over every rank's buffer, in rank order; then every rank copies the
  // whole sum.
  template <typename T>
  void all_reduce(std::span<T> data, std::vector<std::span<T>>& buffers, std::vector<T>& sum) {
    InProcessGroup::State& s = *state_;
    buffers[rank_] = data;
    if (rank_ == 0) sum.resize(data.size());
    s.barrier.arrive_and_wait();
    const size_t n = data.size(), first = n * rank_ / s.size, last = n * (rank_ + 1) / s.size;
    for (size_t r = 0; r < s.size; ++r)
      KVS_ASSERT(buffers[r].size() == n, "all-reduce of {} values on rank {}, {} on rank {}", n, rank_,
                 buffers[r].size(), r);
    for (size_t i = first; i < last; ++i) {
      T total = buffers[0][i];
      for (size_t r = 1; r < s.size; ++r) total += buffers[r][i];
      sum[i] = total;
    }
    s.barrier.arrive_and_wait();
    std::copy(sum.begin(), sum.end(), data.begin());
    s.barrier.arrive_and_wait();  // the sum is read by all before the next collective reuses it
  }

  std::shared_ptr<InProcessGroup::State> state_;
  size_t rank_;
};

}  // namespace

void SingleRankCommunicator::gather(std::span<const float> in, std::span<float> out, size_t) {
  std::copy(in.begin(), in.end(), out.begin());
}

std::vector<std::unique_ptr<Communicator>> InProcessGroup::make(size_t n) {
  KVS_ASSERT(n >= 1, "a group of {} ranks", n);
  auto state = std::make_shared<State>(n);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (size_t r = 0; r < n; ++r) ranks.push_back(std::make_unique<InProcessCommunicator>(state, r));
  return ranks;
}

}  // namespace kvs
