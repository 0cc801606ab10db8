// The engine thread: owns the model and runs generation jobs with continuous batching — every
// step advances all running requests together (decode tokens first, then prefill chunks within
// a token budget), admitting new requests as others finish. IO threads hand jobs over through a
// bounded lock-free queue and never wait on the engine; the engine publishes tokens through each
// job's sink and never waits on IO.
#pragma once

#include <atomic>
#include <boost/lockfree/queue.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/cache/prefix_cache.h"
#include "engine/scheduler/async_forward.h"
#include "engine/scheduler/generator.h"

namespace deepinfer {

/// One request as the engine sees it. The IO side keeps a shared_ptr to cancel it.
struct EngineJob {
  uint64_t id = 0;      // unique across the daemon
  uint64_t stream = 0;  // sampling stream: with a client seed, draws depend on it alone
  uint64_t client = 0;  // connection: free batch slots go to the client with the fewest running
  GenerationParams params;
  std::atomic<bool> cancel{false};
  /// Called on the engine thread for every token; returning false ends the request (a client
  /// that is gone or too slow). Must not block.
  std::function<bool(const GeneratedToken&)> on_token;
  /// Called once on the engine thread when the job ends (ok: finish reason; else the error).
  std::function<void(const Result<GenerationEnd>&)> on_done;
};

struct EngineStats {
  std::atomic<uint64_t> jobs_done{0};
  std::atomic<uint64_t> tokens_generated{0};
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> running{0};
  std::atomic<uint64_t> steps{0};        // engine progress, fed to the systemd watchdog
  std::atomic<uint64_t> cache_bytes{0};  // per-sequence state of the running requests
  std::atomic<uint64_t> preemptions{0};
  std::atomic<uint64_t> prefix_cache_hit_tokens{0};
  std::atomic<uint64_t> prefix_cache_lookup_tokens{0};
  std::atomic<uint64_t> prefix_cache_bytes{0};
  // The model's block pool (compressed rows and indexer keys of running sequences and prefix
  // snapshots, each block counted once however many hold it), and blocks kept for reuse.
  std::atomic<uint64_t> kv_blocks_in_use{0};
  std::atomic<uint64_t> kv_blocks_free{0};
  // The slot path's slots (forward slots): all of them, and those no sequence holds now.
  std::atomic<int64_t> slots_total{0};
  std::atomic<int64_t> slots_free{0};
  std::atomic<int64_t> slots_parked{0};  // held by ended sequences for their next turn
  std::atomic<int64_t> slots_shared{0};  // held by donors of shared prompt prefixes
  // Step timing: model time per step, and the gap between one step's end and the next one's
  // start while requests keep running (the device idles there unless the loop overlaps).
  std::atomic<uint64_t> forward_ns_total{0};
  std::atomic<uint64_t> forward_steps{0};
  std::atomic<uint64_t> idle_gap_ns_total{0};
  std::atomic<uint64_t> idle_gap_ns_max{0};
  std::atomic<uint64_t> idle_gaps{0};
  // Tokens the slot stepper drew (the device forward on the GPU; device_sampling), not the host.
  std::atomic<uint64_t> stepper_sampled_tokens{0};
  // Of those, draws the stepper made twice (the GPU's nucleus among the selected missed).
  std::atomic<uint64_t> stepper_redrawn_draws{0};

  void RecordIdleGap(uint64_t ns) {
    idle_gap_ns_total.fetch_add(ns, std::memory_order_relaxed);
    idle_gaps.fetch_add(1, std::memory_order_relaxed);
    if (ns > idle_gap_ns_max.load(std::memory_order_relaxed)) {
      idle_gap_ns_max.store(ns, std::memory_order_relaxed);
    }
  }
  void RecordStep(uint64_t forward_ns) {
    forward_ns_total.fetch_add(forward_ns, std::memory_order_relaxed);
    forward_steps.fetch_add(1, std::memory_order_relaxed);
    steps.fetch_add(1, std::memory_order_relaxed);
  }
};

class EngineWorker {
 public:
  struct Options {
    size_t queue_capacity = 1024;
    size_t max_running = 64;          // requests in one batch
    int64_t step_token_budget = 512;  // tokens per step (prefill chunks fill what decode leaves)
    uint64_t cache_memory_bytes = 0;  // running sequences' state; 0 = unlimited
    uint64_t prefix_cache_bytes = 0;  // snapshots of prefixes at 128-token boundaries; 0 = off
    bool park_slots = true;       // slot path: ended sequences stay in their slots (ParkedSlots)
    bool share_prefixes = true;   // slot path: donors for prefixes prompts share (SlotReuse)
    bool device_sampling = true;  // slot path: draws on the stepper where they can (StepDraws)
    bool overlap = true;       // prepare the next step (masks, new requests) while the model runs
    int sampling_threads = 1;  // requests of a step sample in parallel (the model is idle then)
  };
  EngineWorker(Model& model, const Tokenizer* tokenizer, Options options);
  EngineWorker(Model& model, const Tokenizer* tokenizer, size_t queue_capacity)
      : EngineWorker(model, tokenizer, Options{queue_capacity}) {}
  ~EngineWorker();

  void Start();
  /// Stops taking jobs; jobs still queued are cancelled; returns after the thread exits.
  void Stop();
  /// Hands a job to the engine. False when the queue is full (the caller reports "busy").
  bool Submit(std::shared_ptr<EngineJob> job);
  const EngineStats& stats() const { return stats_; }

 private:
  void Loop();

  Model& model_;
  const Tokenizer* tok_;
  Options options_;
  // Holds heap-allocated shared_ptrs (the queue needs trivially copyable elements).
  boost::lockfree::queue<std::shared_ptr<EngineJob>*> inbox_;
  std::atomic<bool> stopping_{false};
  // Wakes the idle engine thread; IO only notifies, the engine only waits when it has no work.
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::thread thread_;
  EngineStats stats_;
};

}  // namespace deepinfer
