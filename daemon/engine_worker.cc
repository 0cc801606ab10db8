#include "daemon/engine_worker.h"

namespace deepinfer {

EngineWorker::EngineWorker(Model& model, const Tokenizer* tokenizer, size_t queue_capacity)
    : model_(model), tok_(tokenizer), inbox_(queue_capacity) {}

EngineWorker::~EngineWorker() { Stop(); }

void EngineWorker::Start() {
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void EngineWorker::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool EngineWorker::Submit(std::shared_ptr<EngineJob> job) {
  auto* raw = new std::shared_ptr<EngineJob>(std::move(job));
  if (!inbox_.bounded_push(raw)) {
    delete raw;
    return false;
  }
  stats_.queue_depth.fetch_add(1);
  // Taking the lock orders this notify after the engine's check-then-wait.
  { std::lock_guard<std::mutex> lock(wake_mu_); }
  wake_.notify_one();
  return true;
}

void EngineWorker::Loop() {
  Generator generator(model_, tok_);
  for (;;) {
    std::shared_ptr<EngineJob>* raw = nullptr;
    if (!inbox_.pop(raw)) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      if (stopping_) break;
      wake_.wait(lock, [&] { return stopping_.load() || !inbox_.empty(); });
      continue;
    }
    std::unique_ptr<std::shared_ptr<EngineJob>> holder(raw);
    EngineJob& job = **holder;
    stats_.queue_depth.fetch_sub(1);
    if (stopping_) {
      job.on_done(GenerationEnd::kCancelled);
      continue;
    }
    stats_.running.fetch_add(1);
    stats_.prompt_tokens.fetch_add(job.params.prompt.size());
    Result<GenerationEnd> r = generator.Run(
        job.stream, job.params,
        [&](const GeneratedToken& t) {
          stats_.tokens_generated.fetch_add(1, std::memory_order_relaxed);
          stats_.steps.fetch_add(1, std::memory_order_relaxed);
          return !stopping_.load(std::memory_order_relaxed) && job.on_token(t);
        },
        &job.cancel);
    stats_.running.fetch_sub(1);
    stats_.jobs_done.fetch_add(1);
    job.on_done(r);
  }
  // Jobs left in the queue at shutdown end as cancelled.
  std::shared_ptr<EngineJob>* raw = nullptr;
  while (inbox_.pop(raw)) {
    std::unique_ptr<std::shared_ptr<EngineJob>> holder(raw);
    stats_.queue_depth.fetch_sub(1);
    (*holder)->on_done(GenerationEnd::kCancelled);
  }
}

}  // namespace deepinfer
