// The thread pool's work sharing: every chunk runs exactly once on a valid thread, over thousands of
// back-to-back jobs (the race-prone part: workers joining late, jobs closing); a thread that stalls
// inside a chunk leaves the rest of its share to the others; parallel_for covers its range once.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace kvs {
namespace {

TEST(ThreadPool, EveryChunkRunsOnceOverManyJobs) {
  for (size_t threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    std::mt19937 rng(static_cast<unsigned>(threads));
    std::uniform_int_distribution<size_t> chunk_count(0, 40);
    for (int job = 0; job < 3000; ++job) {
      const size_t n = chunk_count(rng);
      std::vector<std::atomic<int>> runs(n);
      std::atomic<int> bad_thread{0};
      pool.for_chunks(n, [&](size_t chunk, size_t thread) {
        runs[chunk].fetch_add(1);
        if (thread >= threads) bad_thread.fetch_add(1);
      });
      for (size_t c = 0; c < n; ++c)
        ASSERT_EQ(runs[c].load(), 1) << threads << " threads, job " << job << " chunk " << c;
      ASSERT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPool, CallsOnOneThreadNeverOverlap) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> inside(3);
  std::atomic<int> overlaps{0};
  for (int job = 0; job < 500; ++job) {
    pool.for_chunks(24, [&](size_t, size_t thread) {
      if (inside[thread].fetch_add(1) != 0) overlaps.fetch_add(1);
      inside[thread].fetch_sub(1);
    });
  }
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(ThreadPool, AStalledThreadsShareIsDoneByTheOthers) {
  ThreadPool pool(2);
  std::atomic<int> by_caller{0};
  std::atomic<bool> stalled{false};
  pool.for_chunks(100, [&](size_t, size_t thread) {
    if (thread == 0) {
      by_caller.fetch_add(1);
    } else if (!stalled.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the worker's first chunk stalls
    }
  });
  // The worker owned chunks 50..99; it ran at most the one it stalled in, the caller took the rest.
  EXPECT_GE(by_caller.load(), 99);
}

TEST(ThreadPool, ParallelForCoversTheRangeOnceInWholeGrains) {
  ThreadPool pool(2);
  for (size_t n : {0u, 1u, 15u, 16u, 17u, 100u, 768u, 32000u}) {
    for (size_t grain : {1u, 16u, 32u}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> misaligned{0};
      pool.parallel_for(n, grain, [&](size_t begin, size_t end) {
        if (begin % grain != 0 || (end % grain != 0 && end != n)) misaligned.fetch_add(1);
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain << " index " << i;
      EXPECT_EQ(misaligned.load(), 0) << "n " << n << " grain " << grain;
    }
  }
}

TEST(ThreadPool, RunGivesEveryIndexOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run([&](size_t index, size_t count) {
    EXPECT_EQ(count, 4u);
    seen[index].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

}  // namespace
}  // namespace kvs
