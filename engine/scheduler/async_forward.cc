#include "engine/scheduler/async_forward.h"

namespace deepinfer {

AsyncForward::AsyncForward(Model& model) : model_(model), thread_([this] { Run(); }) {}

AsyncForward::~AsyncForward() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncForward::Launch(std::span<BatchItem> items) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_ = items;
    pending_ = true;
  }
  cv_.notify_all();
}

Status AsyncForward::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !pending_ && !running_; });
  return status_;
}

void AsyncForward::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return pending_ || stop_; });
    if (stop_) return;
    pending_ = false;
    running_ = true;
    const std::span<BatchItem> items = items_;
    lock.unlock();
    Status st = model_.ForwardBatch(items);
    const Clock::time_point done = Clock::now();
    lock.lock();
    status_ = std::move(st);
    finished_at_ = done;
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace deepinfer
