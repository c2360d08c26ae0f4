// Drives an Engine from its own thread and makes it safe to use from many threads (HTTP
// handlers): submit() validates at once and returns a stream of outputs; cancel() aborts;
// metrics() snapshots. The thread sleeps on a condition variable while there is no work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/engine.h"

namespace kvs {

// The outputs of one request, in order. Filled by the engine thread, drained by one consumer.
class RequestStream {
 public:
  SeqId id() const { return id_; }
  void set_id(SeqId id) { id_ = id; }  // before the engine can produce outputs
  // The next output, waiting at most `timeout`; nullopt if none came in time.
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout);
  void push(const RequestOutput& output);  // engine side

 private:
  SeqId id_{0};
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> queue_;
};

class EngineLoop {
 public:
  explicit EngineLoop(Engine& engine);
  ~EngineLoop();  // stop(): aborts what is left and joins the thread
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Fails like Engine::add_request (the request could never run); the stream's last output has
  // finished == true.
  Expected<std::shared_ptr<RequestStream>> submit(RequestParams params);
  void cancel(SeqId id);
  EngineMetrics metrics();
  void stop();

 private:
  void run();

  Engine& engine_;
  std::mutex mutex_;  // guards engine_ and stopping_; held by the loop only during one step
  std::condition_variable work_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvs
