// A persistent pool of worker threads. The calling thread takes part, so a pool of N threads
// starts N - 1 workers. Workers spin briefly after a job (decode issues hundreds of small jobs per
// token) and then sleep on a condition variable, so an idle pool burns no CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace kvs {

class ThreadPool {
 public:
  explicit ThreadPool(size_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return num_threads_; }

  // Runs fn(thread_index, num_threads) once on every thread (the caller is thread 0) and returns
  // when all are done. Not reentrant: fn must not call run() on the same pool.
  void run(const std::function<void(size_t thread_index, size_t num_threads)>& fn);

  // Splits [0, n) into contiguous ranges, one per thread, each a multiple of `grain` except the
  // last, and calls fn(begin, end) for each non-empty range.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);

  // Thread t's range of parallel_for's split of [0, n) over nt threads: [begin, end), possibly empty.
  // For code that runs several splits inside one run() (no barrier between them).
  static std::pair<size_t, size_t> share(size_t n, size_t grain, size_t t, size_t nt);

 private:
  void worker_loop(size_t thread_index);

  size_t num_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};  // bumped once per job; workers wait for a change
  std::atomic<size_t> pending_{0};       // workers still running the current job
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;  // guards sleeping on wake_
  std::condition_variable wake_;
};

}  // namespace kvs
