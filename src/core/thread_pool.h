// A persistent pool of worker threads. The calling thread takes part, so a pool of N threads
// starts N - 1 workers. A job is a list of chunks: each thread owns an equal run of them and takes
// its own from the front (one long stream through memory), and a thread that runs out takes other
// threads' chunks from the back. So a thread that is busy elsewhere (the OS gave its core to an
// HTTP thread) or slower simply does fewer chunks: nobody waits for a thread that is not running.
// Workers spin briefly after a job (decode issues hundreds of small jobs per token) and then sleep
// on a condition variable, so an idle pool burns no CPU.
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

  // Calls fn(chunk, thread) once for every chunk in [0, num_chunks) and returns when all are done.
  // Chunks are claimed as the class comment says; `thread` (< num_threads(), the caller is 0) names
  // the thread running the call, for per-thread scratch: calls with the same thread never overlap.
  // Which thread runs a chunk varies from call to call, so a chunk's result must not depend on it.
  // Not reentrant: fn must not use this pool.
  void for_chunks(size_t num_chunks, const std::function<void(size_t chunk, size_t thread)>& fn);

  // Calls fn(i, num_threads()) for every i in [0, num_threads()), as for_chunks does (so two indices
  // may run one after the other on one thread when the others are busy).
  void run(const std::function<void(size_t index, size_t count)>& fn);

  // Splits [0, n) into ranges of whole `grain`s (the last may be partial), a few per thread, and calls
  // fn(begin, end) for each, as chunks of for_chunks.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);

  // Chunk c of `chunks` equal splits of [0, n) in whole grains: [begin, end), possibly empty.
  static std::pair<size_t, size_t> split(size_t n, size_t grain, size_t c, size_t chunks);
  // How many chunks parallel_for makes of n items in grains of `grain`.
  size_t chunks_for(size_t n, size_t grain) const;

 private:
  void worker_loop(size_t thread_index);
  // Claims and runs chunks of the open job until none are left: its own, then the others'.
  void run_chunks(size_t thread_index);
  // Claims a chunk of thread `owner`'s run: from the front for the owner, from the back for others.
  bool claim(size_t owner, bool front, size_t& chunk);

  // Thread t's unclaimed chunks [lo, hi) of the open job, packed lo | hi << 32, on a line of its own.
  struct alignas(64) ChunkRange {
    std::atomic<uint64_t> bounds{0};
  };

  size_t num_threads_;
  std::vector<std::thread> workers_;
  // The open job: written by the caller before it publishes open_generation_, read by workers after.
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  std::vector<ChunkRange> ranges_;  // one per thread
  // Invariant: a worker reads job_ only between incrementing active_ and decrementing it, and only
  // if open_generation_ still equals the generation it woke for. The caller closes the job
  // (open_generation_ = 0) and then waits for active_ == 0 before it returns, so no worker touches a
  // finished job (both sides use sequentially consistent operations).
  std::atomic<uint64_t> generation_{0};       // bumped once per job; workers wait for a change
  std::atomic<uint64_t> open_generation_{0};  // the job workers may join; 0 = none
  std::atomic<size_t> active_{0};             // workers inside a job
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;  // guards sleeping on wake_
  std::condition_variable wake_;
};

}  // namespace kvs
