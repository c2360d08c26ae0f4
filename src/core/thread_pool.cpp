#include "core/thread_pool.h"

#include <algorithm>

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
}  // namespace

ThreadPool::ThreadPool(size_t num_threads) : num_threads_(std::max<size_t>(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (size_t i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(sleep_mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(const std::function<void(size_t, size_t)>& fn) {
  if (num_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  {
    // Bumping under the mutex means a worker that checked the generation and is about to sleep
    // cannot miss this wake-up.
    std::lock_guard lock(sleep_mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  fn(0, num_threads_);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      KVS_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  grain = std::max<size_t>(1, grain);
  const size_t chunks = (n + grain - 1) / grain;
  if (chunks <= 1 || num_threads_ == 1) {
    if (n > 0) fn(0, n);
    return;
  }
  run([&](size_t t, size_t nt) {
    const auto [begin, end] = share(n, grain, t, nt);
    if (begin < end) fn(begin, end);
  });
}

std::pair<size_t, size_t> ThreadPool::share(size_t n, size_t grain, size_t t, size_t nt) {
  grain = std::max<size_t>(1, grain);
  const size_t chunks = (n + grain - 1) / grain;
  return {std::min(n, chunks * t / nt * grain), std::min(n, chunks * (t + 1) / nt * grain)};
}

void ThreadPool::worker_loop(size_t thread_index) {
  // Generation 0 is the state at construction: a job posted before this thread got going must
  // still count as new, so do not read the current value here.
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = seen;
    for (int spins = 0; spins < kSpinIterations; ++spins) {
      now = generation_.load(std::memory_order_acquire);
      if (now != seen) break;
      KVS_CPU_RELAX();
    }
    if (now == seen) {
      std::unique_lock lock(sleep_mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_.load(std::memory_order_acquire)) return;
    (*job_)(thread_index, num_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kvs
