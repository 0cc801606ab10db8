// AsyncForward: runs Model::ForwardBatch on a thread of its own, so that the engine thread can
// prepare the next step (grammar masks, new requests) while the model computes this one. The
// CUDA backend gets the same split from the stream; on the CPU backend this thread plays the
// device.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <thread>

#include "engine/model/model.h"

namespace deepinfer {

class AsyncForward {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AsyncForward(Model& model);
  ~AsyncForward();
  AsyncForward(const AsyncForward&) = delete;
  AsyncForward& operator=(const AsyncForward&) = delete;

  /// Starts the step. `items` and everything they point to must stay untouched by the caller
  /// until Wait() returns. One step at a time.
  void Launch(std::span<BatchItem> items);
  /// Blocks until the step launched last has finished; its status.
  Status Wait();
  /// When the last step finished on the model thread (not when Wait noticed).
  Clock::time_point finished_at() const { return finished_at_; }

 private:
  void Run();

  Model& model_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::span<BatchItem> items_;
  bool pending_ = false;  // launched, not yet picked up
  bool running_ = false;  // picked up, not yet finished
  bool stop_ = false;
  Status status_;
  Clock::time_point finished_at_{};
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace deepinfer
