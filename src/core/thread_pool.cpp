#include "core/thread_pool.h"

#include <algorithm>
#include <cstdint>

#include "core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KVS_CPU_RELAX() _mm_pause()
#else
#define KVS_CPU_RELAX() ((void)0)
#endif

namespace kvs {
namespace {
// About 50-100 us of spinning before sleeping: long enough to bridge the gap between the
// matrix-vector jobs of one decode step, short enough that an idle pool goes to sleep at once.
constexpr int kSpinIterations = 20000;
// parallel_for's chunks per thread: enough that a thread that falls behind (preempted, or given a
// slower share) is made up for by the others, few enough that each chunk stays one long stream.
constexpr size_t kChunksPerThread = 4;

// Grains of `grain` items (at least 1) that cover n items, the last possibly partial.
size_t grain_count(size_t n, size_t& grain) {
  grain = std::max<size_t>(1, grain);
  return (n + grain - 1) / grain;
}
}  // namespace

ThreadPool::ThreadPool(size_t num_threads) : num_threads_(std::max<size_t>(1, num_threads)), ranges_(num_threads_) {
  workers_.reserve(num_threads_ - 1);
  for (size_t i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  {
    std::lock_guard lock(sleep_mutex_);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::claim(size_t owner, bool front, size_t& chunk) {
  std::atomic<uint64_t>& bounds = ranges_[owner].bounds;
  uint64_t now = bounds.load();
  for (;;) {
    const uint64_t lo = now & 0xffffffffu, hi = now >> 32;
    if (lo >= hi) return false;
    const uint64_t next = front ? (lo + 1) | (hi << 32) : lo | ((hi - 1) << 32);
    if (bounds.compare_exchange_weak(now, next)) {
      chunk = front ? lo : hi - 1;
      return true;
    }
  }
}

void ThreadPool::run_chunks(size_t thread_index) {
  size_t chunk = 0;
  while (claim(thread_index, true, chunk)) (*job_)(chunk, thread_index);
  for (size_t k = 1; k < num_threads_; ++k) {
    const size_t owner = (thread_index + k) % num_threads_;
    while (claim(owner, false, chunk)) (*job_)(chunk, thread_index);
  }
}

void ThreadPool::for_chunks(size_t num_chunks, const std::function<void(size_t, size_t)>& fn) {
  if (num_threads_ == 1 || num_chunks <= 1) {
    for (size_t c = 0; c < num_chunks; ++c) fn(c, 0);
    return;
  }
  KVS_ASSERT(num_chunks < (uint64_t{1} << 32), "a job of {} chunks; at most 2^32 - 1", num_chunks);
  job_ = &fn;
  for (size_t t = 0; t < num_threads_; ++t) {
    const uint64_t lo = num_chunks * t / num_threads_, hi = num_chunks * (t + 1) / num_threads_;
    ranges_[t].bounds.store(lo | (hi << 32));
  }
  const uint64_t generation = generation_.load() + 1;
  open_generation_.store(generation);
  {
    // Bumping under the mutex means a worker that checked the generation and is about to sleep
    // cannot miss this wake-up.
    std::lock_guard lock(sleep_mutex_);
    generation_.store(generation);
  }
  wake_.notify_all();
  run_chunks(0);
  // Every chunk is claimed; close the job and wait for the workers still running one.
  open_generation_.store(0);
  for (int spins = 0; active_.load() != 0; ++spins) {
    if (spins < kSpinIterations) {
      KVS_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::run(const std::function<void(size_t, size_t)>& fn) {
  for_chunks(num_threads_, [&](size_t index, size_t) { fn(index, num_threads_); });
}

std::pair<size_t, size_t> ThreadPool::split(size_t n, size_t grain, size_t c, size_t chunks) {
  const size_t grains = grain_count(n, grain);
  return {std::min(n, grains * c / chunks * grain), std::min(n, grains * (c + 1) / chunks * grain)};
}

size_t ThreadPool::chunks_for(size_t n, size_t grain) const {
  const size_t grains = grain_count(n, grain);
  return std::min(grains, num_threads_ == 1 ? size_t{1} : num_threads_ * kChunksPerThread);
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  const size_t chunks = chunks_for(n, grain);
  if (chunks <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  for_chunks(chunks, [&](size_t c, size_t) {
    const auto [begin, end] = split(n, grain, c, chunks);
    if (begin < end) fn(begin, end);
  });
}

void ThreadPool::worker_loop(size_t thread_index) {
  // Generation 0 is the state at construction: a job posted before this thread got going must
  // still count as new, so do not read the current value here.
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = seen;
    for (int spins = 0; spins < kSpinIterations; ++spins) {
      now = generation_.load();
      if (now != seen) break;
      KVS_CPU_RELAX();
    }
    if (now == seen) {
      std::unique_lock lock(sleep_mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      now = generation_.load();
    }
    seen = now;
    if (stopping_.load()) return;
    active_.fetch_add(1);
    if (open_generation_.load() == seen) run_chunks(thread_index);
    active_.fetch_sub(1);
  }
}

}  // namespace kvs
