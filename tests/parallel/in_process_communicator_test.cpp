// The in-process communicator: N threads, one rank each, run the collectives tensor parallelism uses.
// All-reduce: every rank gets the same bits, equal to the sum in rank order (derived here in a loop);
// broadcast: the root's bytes everywhere; gather: the ranks' slices in rank order at the root. Many
// collectives back to back reuse the shared buffers safely (the last rounds' results are checked).
#include "parallel/in_process_communicator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

namespace kvs {
namespace {

// Runs fn(communicator) on a thread per rank of a group of n.
template <typename Fn>
void on_every_rank(size_t n, Fn fn) {
  auto ranks = InProcessGroup::make(n);
  std::vector<std::thread> threads;
  for (auto& comm : ranks) threads.emplace_back([&fn, c = comm.get()] { fn(*c); });
  for (auto& t : threads) t.join();
}

// Rank r's vector for round k: values of mixed magnitude, so that the order of addition shows in the bits.
std::vector<float> values(size_t rank, size_t round, size_t len) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 7919 + round));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = d(rng) * (i % 3 == 0 ? 1e6f : 1e-3f);
  return v;
}

TEST(InProcessCommunicator, AllReduceGivesEveryRankTheRankOrderSum) {
  for (size_t n : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(n);
    constexpr size_t kRounds = 50, kLen = 1001;  // not a multiple of n: uneven slices
    std::vector<std::vector<float>> last(n);
    on_every_rank(n, [&](Communicator& c) {
      EXPECT_EQ(c.size(), n);
      std::vector<float> v;
      for (size_t k = 0; k < kRounds; ++k) {
        v = values(c.rank(), k, kLen);
        c.all_reduce_sum(v);
      }
      last[c.rank()] = v;
    });
    std::vector<float> expected = values(0, kRounds - 1, kLen);
    for (size_t r = 1; r < n; ++r) {
      const std::vector<float> add = values(r, kRounds - 1, kLen);
      for (size_t i = 0; i < kLen; ++i) expected[i] += add[i];
    }
    for (size_t r = 0; r < n; ++r)
      EXPECT_EQ(0, std::memcmp(last[r].data(), expected.data(), kLen * sizeof(float))) << "rank " << r;
  }
}

// Integer sums (attention-score counters) interleaved with float ones: exact, on every rank.
TEST(InProcessCommunicator, IntegerAllReduceIsExactBetweenFloatOnes) {
  constexpr size_t n = 3, kLen = 77;
  std::vector<std::vector<uint64_t>> got(n);
  on_every_rank(n, [&](Communicator& c) {
    std::vector<uint64_t> counts(kLen);
    for (size_t i = 0; i < kLen; ++i) counts[i] = (uint64_t{1} << 40) * (c.rank() + 1) + i;
    std::vector<float> f(5, 1.0f);
    c.all_reduce_sum(f);
    c.all_reduce_sum(std::span<uint64_t>(counts));
    c.all_reduce_sum(f);
    EXPECT_EQ(f[0], 9.0f);  // (1 x 3) x 3
    got[c.rank()] = counts;
  });
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < kLen; ++i) ASSERT_EQ(got[r][i], (uint64_t{1} << 40) * 6 + 3 * i) << "rank " << r;
}

TEST(InProcessCommunicator, BroadcastAndGather) {
  constexpr size_t n = 3;
  std::vector<std::vector<std::byte>> got(n);
  std::vector<float> gathered(n * 4, -1.0f);
  on_every_rank(n, [&](Communicator& c) {
    std::vector<std::byte> bytes;
    if (c.rank() == 1) bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
    c.broadcast(bytes, 1);
    got[c.rank()] = bytes;
    const std::vector<float> mine(4, static_cast<float>(c.rank() + 10));
    c.gather(mine, c.rank() == 0 ? std::span<float>(gathered) : std::span<float>(), 0);
  });
  for (size_t r = 0; r < n; ++r) EXPECT_EQ(got[r], (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{3}}));
  for (size_t i = 0; i < gathered.size(); ++i) EXPECT_EQ(gathered[i], static_cast<float>(i / 4 + 10)) << i;
}

TEST(SingleRankCommunicator, IsTheIdentity) {
  SingleRankCommunicator c;
  std::vector<float> v{1.0f, 2.0f};
  c.all_reduce_sum(v);
  EXPECT_EQ(v, (std::vector<float>{1.0f, 2.0f}));
  std::vector<float> out(2);
  c.gather(v, out, 0);
  EXPECT_EQ(out, v);
}

}  // namespace
}  // namespace kvs
