#include "daemon/engine_worker.h"

#include <algorithm>
#include <deque>
#include <optional>

#include "engine/cache/slot_reuse.h"
#include "engine/common/thread_pool.h"
#include "engine/scheduler/step_draws.h"

namespace deepinfer {

EngineWorker::EngineWorker(Model& model, const Tokenizer* tokenizer, Options options)
    : model_(model), tok_(tokenizer), options_(options), inbox_(options.queue_capacity) {
  // On the slot path every running request holds a slot: no more run than there are slots.
  if (model.slots_total() > 0) {
    options_.max_running = std::min(options_.max_running, static_cast<size_t>(model.slots_total()));
  }
  stats_.slots_total.store(model.slots_total());
  stats_.slots_free.store(model.slots_free());
}

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
  Generator validator(model_, tok_);
  struct Running {
    std::shared_ptr<EngineJob> job;
    std::unique_ptr<RequestState> state;
    uint64_t admitted;     // admission order: the newest is preempted first
    bool started = false;  // has been looked up in the prefix cache and scheduled
    int64_t share_at = 0;  // slot path: leave a donor after this many tokens (SlotReuse)
  };
  std::vector<Running> running;
  std::deque<Running> preempted;  // back in line before new requests
  // Taken from the inbox, not yet admitted; bounded by the queue capacity so the inbox keeps
  // reporting "busy" when the engine is behind.
  std::deque<std::shared_ptr<EngineJob>> waiting;
  // Fairness across clients: a free slot goes to the oldest waiting job of the client with the
  // fewest running requests, so one client's burst cannot hold everyone else's first token back.
  auto next_waiting = [&] {
    size_t best = 0, best_load = SIZE_MAX;
    for (size_t w = 0; w < waiting.size() && best_load > 0; ++w) {
      // A client's later job never beats its earlier one: skip a burst after its first job.
      if (w > 0 && waiting[w]->client == waiting[w - 1]->client) continue;
      size_t load = 0;
      for (const Running& r : running) load += r.job->client == waiting[w]->client;
      if (load < best_load) {
        best = w;
        best_load = load;
      }
    }
    return best;
  };
  uint64_t admissions = 0;
  const uint64_t budget_bytes = options_.cache_memory_bytes;
  PrefixCache prefix_cache(options_.prefix_cache_bytes);
  SlotReuse reuse(model_, {options_.park_slots, options_.share_prefixes});
  auto publish_slots = [&] {
    stats_.slots_free.store(model_.slots_free(), std::memory_order_relaxed);
    stats_.slots_parked.store(static_cast<int64_t>(reuse.parked()), std::memory_order_relaxed);
    stats_.slots_shared.store(static_cast<int64_t>(reuse.donors()), std::memory_order_relaxed);
  };
  // Slot path: parked states and donors a request about to start (not `self`) extends go last.
  auto wanted_by_others = [&](const RequestState* self) {
    return [&running, self](std::span<const int32_t> key) {
      for (const Running& r : running) {
        const std::span<const int32_t> ctx = r.state->context();
        if (!r.started && r.state.get() != self && key.size() < ctx.size() &&
            std::equal(key.begin(), key.end(), ctx.begin())) {
          return true;
        }
      }
      return false;
    };
  };
  // A request (new or preempted) starts from the longest cached prefix of what it has seen (on
  // the slot path: a parked sequence or a donor's copy, else a slot of its own; SlotReuse).
  auto resume = [&](Running& run) {
    RequestState& st = *run.state;
    if (model_.slots_total() > 0) {
      SequenceState seq = std::move(st.seq());
      reuse.Start(st.context(), wanted_by_others(&st), &seq, &run.share_at);
      st.ResumeFrom(std::move(seq));
      stats_.prefix_cache_hit_tokens.store(reuse.hit_tokens(), std::memory_order_relaxed);
      stats_.prefix_cache_lookup_tokens.store(reuse.lookup_tokens(), std::memory_order_relaxed);
      publish_slots();
      return;
    }
    SequenceState cached;
    if (prefix_cache.Lookup(st.context(), &cached) > 0) st.ResumeFrom(std::move(cached));
    stats_.prefix_cache_hit_tokens.store(prefix_cache.hit_tokens(), std::memory_order_relaxed);
    stats_.prefix_cache_lookup_tokens.store(prefix_cache.lookup_tokens(),
                                            std::memory_order_relaxed);
  };
  // A request about to start waits while a started request is still prefilling a block-aligned
  // prefix they share, so it resumes from that snapshot (on the slot path: from the donor the
  // other is about to leave, SlotReuse::DonorAhead) instead of computing the prefix again. Only
  // started requests are waited on, and they never wait, so this cannot deadlock.
  auto shares_prefix_in_flight = [&](size_t i) {
    if (options_.prefix_cache_bytes == 0 && !reuse.sharing()) return false;
    const std::span<const int32_t> ctx = running[i].state->context();
    for (size_t j = 0; j < running.size(); ++j) {
      if (j == i || !running[j].started || !running[j].state->prefilling()) continue;
      const std::span<const int32_t> other = running[j].state->context();
      if (reuse.sharing()) {
        if (reuse.DonorAhead(ctx, other, running[j].state->seq().length, running[j].share_at)) {
          return true;
        }
        continue;
      }
      const size_t n = std::min(ctx.size() - 1, other.size());
      const size_t common = static_cast<size_t>(
          std::mismatch(ctx.begin(), ctx.begin() + static_cast<std::ptrdiff_t>(n), other.begin())
              .first -
          ctx.begin());
      const int64_t shared =
          static_cast<int64_t>(common) / PrefixCache::kBlock * PrefixCache::kBlock;
      if (shared > 0 && running[j].state->seq().length < shared) return true;
    }
    return false;
  };
  auto cache_bytes = [&] {
    uint64_t b = 0;
    for (const Running& r : running) b += r.state->seq().bytes();
    return b;
  };
  std::vector<float> logits;
  std::vector<BatchItem> items;
  std::vector<size_t> item_of;  // running index -> item index (or SIZE_MAX)
  StepDraws draws(model_, options_.device_sampling);
  std::vector<RequestState*> draw_states;  // this step's sampled requests, for StepDraws
  std::vector<size_t> draw_items;
  auto finish = [&](size_t i, const Result<GenerationEnd>& r) {
    stats_.jobs_done.fetch_add(1);
    running[i].job->on_done(r);
    // On the slot path an ended (or cancelled) request's slot stays parked for its next turn;
    // after an error its state is undefined and goes.
    if (r.ok() && reuse.parking()) {
      SequenceState& seq = running[i].state->seq();
      std::vector<int32_t> fed = running[i].state->TakeContext();  // the request is ending
      fed.resize(static_cast<size_t>(seq.length));
      reuse.Park(std::move(fed), std::move(seq));
    }
    running[i] = std::move(running.back());
    running.pop_back();
  };
  // New jobs from the inbox into `waiting`; a waiting job cancelled by its client ends now, not
  // when a slot frees up. Touches nothing the model step uses, so it may run during one.
  auto take_new_jobs = [&] {
    std::shared_ptr<EngineJob>* raw = nullptr;
    while (waiting.size() < options_.queue_capacity && inbox_.pop(raw)) {
      std::unique_ptr<std::shared_ptr<EngineJob>> holder(raw);
      waiting.push_back(std::move(*holder));
    }
    for (size_t w = 0; w < waiting.size();) {
      if (stopping_ || waiting[w]->cancel.load(std::memory_order_relaxed)) {
        stats_.queue_depth.fetch_sub(1);
        waiting[w]->on_done(GenerationEnd::kCancelled);
        waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(w));
      } else {
        ++w;
      }
    }
  };
  ThreadPool sampling_pool(std::max(1, options_.sampling_threads));
  std::vector<Status> sampled;  // per running index, after the parallel sampling
  std::optional<AsyncForward> async;
  if (options_.overlap) async.emplace(model_);
  std::vector<size_t> samples_now;  // running indexes whose row is sampled after this step
  std::vector<uint8_t> prefilled;   // per running index: this step fed it a prefill chunk
  bool stepped = false;             // the previous iteration ran a step (for the idle gap)
  AsyncForward::Clock::time_point last_end{};
  for (;;) {
    // Admit waiting requests while there is room in the batch and in the cache budget.
    auto has_room = [&] {
      return running.size() < options_.max_running &&
             (budget_bytes == 0 || running.empty() || cache_bytes() < budget_bytes);
    };
    while (!preempted.empty() && has_room()) {
      running.push_back(std::move(preempted.front()));
      preempted.pop_front();
    }
    take_new_jobs();
    while (preempted.empty() && has_room() && !waiting.empty()) {
      const size_t w = next_waiting();
      std::shared_ptr<EngineJob> job = std::move(waiting[w]);
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(w));
      stats_.queue_depth.fetch_sub(1);
      if (Status st = validator.Validate(job->params); !st.ok()) {
        job->on_done(st);
        continue;
      }
      stats_.prompt_tokens.fetch_add(job->params.prompt.size());
      auto state = std::make_unique<RequestState>(model_, tok_, job->stream, job->params);
      // On the slot path a request takes its slot when it starts (resume), so that a parked state
      // it will continue is not dropped to make room for a slot it would then give back.
      if (model_.slots_total() > 0) state->ResumeFrom(SequenceState());
      running.push_back({std::move(job), std::move(state), admissions++});
    }
    stats_.running.store(static_cast<int64_t>(running.size()));
    for (size_t i = 0; i < running.size();) {
      if (stopping_ || running[i].job->cancel.load(std::memory_order_relaxed)) {
        finish(i, GenerationEnd::kCancelled);
      } else {
        ++i;
      }
    }
    for (size_t i = 0; i < preempted.size();) {
      if (stopping_ || preempted[i].job->cancel.load(std::memory_order_relaxed)) {
        stats_.jobs_done.fetch_add(1);
        preempted[i].job->on_done(GenerationEnd::kCancelled);
        preempted.erase(preempted.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    // Over the cache budget: the newest requests step aside (their state is freed and later
    // recomputed), never the last one.
    while (budget_bytes > 0 && running.size() > 1 && cache_bytes() > budget_bytes) {
      size_t newest = 0;
      for (size_t i = 1; i < running.size(); ++i) {
        if (running[i].admitted > running[newest].admitted) newest = i;
      }
      running[newest].state->Preempt();
      running[newest].started = false;  // looked up again when it comes back
      preempted.push_front(std::move(running[newest]));
      running[newest] = std::move(running.back());
      running.pop_back();
      stats_.preemptions.fetch_add(1);
    }
    if (running.empty() && preempted.empty()) {
      stepped = false;
      stats_.cache_bytes.store(0);
      const BlockPool::Stats pool = model_.block_pool_stats();  // what the snapshots still hold
      stats_.kv_blocks_in_use.store(pool.blocks_in_use, std::memory_order_relaxed);
      stats_.kv_blocks_free.store(pool.blocks_free, std::memory_order_relaxed);
      publish_slots();
      std::unique_lock<std::mutex> lock(wake_mu_);
      if (stopping_) break;
      wake_.wait(lock, [&] { return stopping_.load() || !inbox_.empty(); });
      continue;
    }
    // One step: every decoding request gets its token, prefills share what is left of the budget.
    items.clear();
    samples_now.clear();
    item_of.assign(running.size(), SIZE_MAX);
    prefilled.assign(running.size(), 0);
    int64_t budget = options_.step_token_budget;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < running.size(); ++i) {
        RequestState& st = *running[i].state;
        if (st.prefilling() != (pass == 1)) continue;
        if (pass == 1 && budget <= 0 && !items.empty()) break;
        if (!running[i].started) {
          if (shares_prefix_in_flight(i)) continue;
          resume(running[i]);
          running[i].started = true;
        }
        std::span<const int32_t> in =
            st.NextInput(budget, options_.prefix_cache_bytes > 0, running[i].share_at);
        budget -= static_cast<int64_t>(in.size());
        prefilled[i] = pass == 1;
        if (static_cast<size_t>(st.seq().length) + in.size() == st.context().size()) {
          samples_now.push_back(i);
        }
        item_of[i] = items.size();
        items.push_back({&st.seq(), in, nullptr, nullptr, true});
      }
    }
    draw_states.clear();
    draw_items.clear();
    for (size_t i : samples_now) {
      draw_states.push_back(running[i].state.get());
      draw_items.push_back(item_of[i]);
    }
    draws.Plan(items, draw_states, draw_items, logits, &sampling_pool);
    const AsyncForward::Clock::time_point start = AsyncForward::Clock::now();
    if (stepped) {
      stats_.RecordIdleGap(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(start - last_end).count()));
    }
    // The model step goes to its own thread only when there is something to prepare meanwhile
    // (the host draws' grammar masks): handing a step over costs two thread wake-ups, which on a
    // busy CPU host cost more than they hide (bench/RESULTS.md, "request rate").
    bool masks_to_prepare = false;
    for (size_t k = 0; k < samples_now.size(); ++k)
      masks_to_prepare |= running[samples_now[k]].state->constrained() && !draws.drawn(k);
    Status st;
    if (async && masks_to_prepare) {
      async->Launch(items);
      // While the model runs: the grammar masks this step's samples need, and new requests.
      for (size_t i : samples_now) running[i].state->PrepareMask();
      take_new_jobs();
      st = async->Wait();
      last_end = async->finished_at();
    } else {
      st = model_.ForwardBatch(items);
      last_end = AsyncForward::Clock::now();
    }
    stepped = true;
    stats_.RecordStep(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(last_end - start).count()));
    stats_.cache_bytes.store(cache_bytes(), std::memory_order_relaxed);
    const BlockPool::Stats pool = model_.block_pool_stats();
    stats_.kv_blocks_in_use.store(pool.blocks_in_use, std::memory_order_relaxed);
    stats_.kv_blocks_free.store(pool.blocks_free, std::memory_order_relaxed);
    // Draws for every request sampled this step, in parallel; what they emit follows in order.
    sampled.assign(running.size(), Status::Ok());
    if (st.ok()) {
      sampling_pool.ParallelFor(
          static_cast<int64_t>(samples_now.size()), [&](int64_t b, int64_t e) {
            for (int64_t k = b; k < e; ++k) {
              const size_t i = samples_now[static_cast<size_t>(k)];
              const size_t d = static_cast<size_t>(k);
              sampled[i] = draws.drawn(d) ? draws.Accept(d, *running[i].state)
                                          : running[i].state->Sample(draws.logits(d));
            }
          });
      stats_.stepper_sampled_tokens.fetch_add(draws.TakeAccepted());
      stats_.stepper_redrawn_draws.store(static_cast<uint64_t>(model_.stepper_redrawn_draws()),
                                         std::memory_order_relaxed);
    }
    for (size_t i = running.size(); i-- > 0;) {
      if (item_of[i] == SIZE_MAX) continue;
      if (!st.ok() || !sampled[i].ok()) {
        finish(i, st.ok() ? sampled[i] : st);
        continue;
      }
      // A prefill chunk that ended on a block boundary leaves a state worth keeping (even a
      // one-token chunk, which is what a nearly spent step budget leaves).
      const SequenceState& seq = running[i].state->seq();
      if (prefilled[i] && seq.length == running[i].share_at) {  // its donor point, once
        reuse.Stepped(running[i].state->context(), seq, running[i].share_at,
                      wanted_by_others(nullptr));
      }
      if (prefilled[i] && seq.length % PrefixCache::kBlock == 0) {
        prefix_cache.Insert(running[i].state->context().first(seq.length), seq);
        stats_.prefix_cache_bytes.store(prefix_cache.bytes(), std::memory_order_relaxed);
      }
      EngineJob& job = *running[i].job;
      auto end = running[i].state->Emit([&](const GeneratedToken& t) {
        stats_.tokens_generated.fetch_add(1, std::memory_order_relaxed);
        return job.on_token(t);
      });
      if (!end.ok()) {
        finish(i, end.status());
      } else if (end->has_value()) {
        finish(i, **end);
      }
    }
    publish_slots();  // after this step's donors and parked states
  }
  stats_.running.store(0);
  stats_.cache_bytes.store(0);
  // Requests still running or queued at shutdown end as cancelled.
  while (!running.empty()) finish(running.size() - 1, GenerationEnd::kCancelled);
  for (Running& r : preempted) r.job->on_done(GenerationEnd::kCancelled);
  preempted.clear();
  for (auto& job : waiting) {
    stats_.queue_depth.fetch_sub(1);
    job->on_done(GenerationEnd::kCancelled);
  }
  waiting.clear();
  std::shared_ptr<EngineJob>* raw = nullptr;
  while (inbox_.pop(raw)) {
    std::unique_ptr<std::shared_ptr<EngineJob>> holder(raw);
    stats_.queue_depth.fetch_sub(1);
    (*holder)->on_done(GenerationEnd::kCancelled);
  }
}

}  // namespace deepinfer
