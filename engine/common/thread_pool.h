// A fixed pool of worker threads for data-parallel loops on the CPU backend.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
 public:
  /// `threads` counts the calling thread too; 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs fn(begin, end) over [0, n) split into contiguous chunks, one per thread, and waits.
  /// The split depends only on n and the pool size, so results are reproducible.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace deepinfer
