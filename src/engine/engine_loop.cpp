#include "engine/engine_loop.h"

namespace kvs {

std::optional<RequestOutput> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

void RequestStream::push(const RequestOutput& output) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(output);
  }
  ready_.notify_one();
}

EngineLoop::EngineLoop(Engine& engine) : engine_(engine), thread_([this] { run(); }) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Expected<std::shared_ptr<RequestStream>> EngineLoop::submit(RequestParams params) {
  std::lock_guard lock(mutex_);
  if (stopping_) return Status::unavailable("the engine is shutting down");
  auto stream = std::make_shared<RequestStream>();
  auto id = engine_.add_request(std::move(params), [stream](const RequestOutput& out) { stream->push(out); });
  if (!id) return id.status();
  stream->set_id(*id);  // outputs flow only after this lock is released
  work_.notify_all();
  return stream;
}

void EngineLoop::cancel(SeqId id) {
  std::lock_guard lock(mutex_);
  engine_.abort(id);
}

EngineMetrics EngineLoop::metrics() {
  std::lock_guard lock(mutex_);
  return engine_.metrics();
}

void EngineLoop::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || engine_.has_work(); });
    if (stopping_) break;
    engine_.step();
    // Let submitters and cancellers in between steps.
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  // Shutting down: end whatever is left so no client waits forever (each gets a final output).
  engine_.abort_all();
}

}  // namespace kvs
