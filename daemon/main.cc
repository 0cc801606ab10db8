// deepinferd: loads the model, warms it up, serves clients on the Unix socket until SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>

#include "daemon/config.h"
#include "daemon/engine_worker.h"
#include "daemon/server.h"
#include "daemon/systemd.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_forward.h"
#include "engine/model/host_slot_stepper.h"
#include "grammar/tokenizer_vocabulary.h"

namespace deepinfer::daemon {
namespace {

namespace asio = boost::asio;

// device_sampling's auto: draws on the device forward, the host sampler's pool on the CPU
// reference (whose draws would run one after another inside the step), and on the host above
// the vocabulary the GPU sampler takes; on there is an error.
Result<bool> DrawsOnStepper(const DaemonConfig& cfg, int32_t vocab) {
  const bool fits = cfg.device != "cuda" || vocab <= int64_t{kSumChunk} * kMaxSumRuns;
  if (cfg.device_sampling == "on" && !fits) {
    return InvalidArgument("device_sampling on: the GPU sampler takes vocabularies up to " +
                           std::to_string(int64_t{kSumChunk} * kMaxSumRuns) +
                           " ids, this model has " + std::to_string(vocab));
  }
  return cfg.device_sampling == "on" ||
         (cfg.device_sampling == "auto" && cfg.device == "cuda" && fits);
}

int Run(int argc, char** argv) {
  auto parsed = ParseDaemonArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "deepinferd: %s\n", parsed.status().ToString().c_str());
    return 2;
  }
  DaemonConfig cfg = std::move(parsed).value();
  if (cfg.help) {
    std::fputs(ConfigUsage().c_str(), stdout);
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  auto fail = [](const Status& st) {
    spdlog::critical("{}", st.ToString());
    (void)NotifyStatus("failed: " + st.message());
    return 1;
  };
  (void)NotifyStatus("loading " + cfg.model_dir);
  auto ck = LoadCheckpoint(cfg.model_dir);
  if (!ck.ok()) return fail(ck.status());
  for (const auto& w : (*ck)->warnings) spdlog::warn("{}", w);
  auto numerics = ParseNumerics(cfg.numerics);
  if (!numerics.ok()) return fail(numerics.status());
  const int threads = cfg.threads > 0
                          ? static_cast<int>(cfg.threads)
                          : static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::unique_ptr<Backend> backend;
  if (cfg.device == "cuda") {
    auto cuda = MakeCudaBackend(0);
    if (!cuda.ok()) return fail(cuda.status());
    backend = std::move(*cuda);
  } else {
    backend = MakeCpuBackend(threads);
  }
  spdlog::info("backend: {}", backend->name());
  Model model(**ck, *backend, *numerics);
  const auto draws_on_stepper = DrawsOnStepper(cfg, model.config().vocab_size);
  if (!draws_on_stepper.ok()) return fail(draws_on_stepper.status());
  // --forward slots: the steps run on a slot stepper — the device forward, or on the CPU its
  // reference over a model of its own — sized by the engine's batch and step budget: decode rows
  // count against the budget and prefill takes what they leave, but every running request gets
  // its row even past the budget.
  std::unique_ptr<Model> stepper_model;  // before the stepper, which uses it, so it ends later
  std::unique_ptr<SlotStepper> stepper;
  if (cfg.forward == "slots") {
    const int chunk = static_cast<int>(cfg.step_token_budget);
    const int rows = std::max(chunk, static_cast<int>(cfg.batch_requests));
    if (cfg.device == "cuda") {
      DeviceForwardOptions o;
      o.max_batch = rows;
      o.max_chunk = chunk;
      o.slots = static_cast<int>(cfg.batch_requests);
      o.max_context = cfg.slot_context;
      o.folded_experts = cfg.folded_experts;
      o.draws = *draws_on_stepper;
      auto dev = DeviceForward::Create(**ck, o);
      if (!dev.ok()) {  // e.g. a model the production kernels do not take: stage 1 may
        return fail(Status(dev.status().code(), dev.status().message() +
                                                    " (--forward layers runs the CUDA backend's "
                                                    "stage 1 instead)"));
      }
      spdlog::info("device forward: {} slots of {} positions, {} MiB on the device", o.slots,
                   o.max_context, (*dev)->device_bytes() >> 20);
      stepper = std::move(dev).value();
    } else {
      stepper_model = std::make_unique<Model>(**ck, *backend, *numerics);
      auto host = std::make_unique<HostSlotStepper>(
          *stepper_model, static_cast<int>(cfg.batch_requests), rows, chunk, cfg.slot_context);
      // Testing hook: a device fault on the CPU reference, for the daemon's fault path.
      if (const char* after = std::getenv("DEEPINFER_FAULT_AFTER_STEPS"); after != nullptr) {
        char* end = nullptr;
        const long long steps = std::strtoll(after, &end, 10);
        if (*after == '\0' || *end != '\0' || steps < 0) {
          return fail(InvalidArgument("DEEPINFER_FAULT_AFTER_STEPS: not a step count"));
        }
        spdlog::warn("testing hook: the slot stepper faults after {} steps", steps);
        host->FailAfter(steps);
      }
      stepper = std::move(host);
    }
    model.UseSlots(stepper.get());
  }
  std::unique_ptr<Tokenizer> tokenizer;
  if (!cfg.tokenizer_dir.empty()) {
    auto tok = Tokenizer::LoadDir(cfg.tokenizer_dir);
    if (!tok.ok()) return fail(tok.status());
    tokenizer = std::move(tok).value();
  } else {
    spdlog::warn("no tokenizer: only prompt_ids requests are served");
  }
  if (tokenizer && tokenizer->vocab_size() < model.config().vocab_size) {
    spdlog::info("model rows {}..{} lie past the tokenizer's ids (padding); they decode to no text",
                 tokenizer->vocab_size(), model.config().vocab_size - 1);
  }
  EngineWorker::Options engine_options;
  engine_options.max_running = cfg.batch_requests;
  engine_options.step_token_budget = cfg.step_token_budget;
  engine_options.cache_memory_bytes = cfg.cache_memory_bytes;
  engine_options.prefix_cache_bytes = cfg.prefix_cache_bytes;
  engine_options.park_slots = cfg.park_slots;
  engine_options.share_prefixes = cfg.share_prefixes;
  engine_options.device_sampling = *draws_on_stepper;
  if (cfg.device_sampling == "on" && !model.samples_on_stepper()) {
    spdlog::warn(
        "device_sampling: on has no effect without forward slots; tokens are drawn on "
        "the host");
  }
  if (cfg.share_prefixes && cfg.park_slots && model.slots_total() > 0 &&
      !model.copies_sequences()) {
    spdlog::warn("share_prefixes: off, this slot stepper cannot copy slots");
  }
  engine_options.overlap = cfg.overlap;
  engine_options.sampling_threads = threads;
  EngineWorker engine(model, tokenizer.get(), engine_options);
  engine.Start();
  if (cfg.warmup) {
    // One real request through the engine before READY: a broken model never reports ready.
    auto job = std::make_shared<EngineJob>();
    job->params.prompt = {model.config().bos_token_id};
    job->params.max_tokens = 2;
    job->params.sampling.temperature = 0;
    std::promise<Status> done;
    job->on_token = [](const GeneratedToken&) { return true; };
    job->on_done = [&](const Result<GenerationEnd>& r) {
      done.set_value(r.ok() ? Status::Ok() : r.status());
    };
    engine.Submit(job);
    Status st = done.get_future().get();
    if (!st.ok()) return fail(st);
  }

  asio::io_context io;
  ModelInfo info{std::filesystem::path(cfg.model_dir).filename().string(),
                 model.config().vocab_size};
  Server server(io, cfg, engine, tokenizer.get(), info);
  if (tokenizer) {
    server.SetVocabulary(std::make_shared<const grammar::TokenVocabulary>(
        grammar::VocabularyFromTokenizer(*tokenizer, model.config().vocab_size)));
  }
  auto activated = ListenFds();
  if (!activated.ok()) return fail(activated.status());
  std::optional<int> fd;
  if (!activated->empty()) fd = (*activated)[0];
  if (Status st = server.Listen(fd); !st.ok()) return fail(st);
  server.Start();

  // SIGTERM/SIGINT: stop admitting, let requests finish within the budget, cancel the rest.
  asio::signal_set stop_signals(io, SIGTERM, SIGINT);
  asio::steady_timer drain_timer(io), watchdog_timer(io);
  std::function<void()> poll_drain;
  const auto drain_deadline = std::make_shared<std::chrono::steady_clock::time_point>();
  poll_drain = [&] {
    if (server.in_flight() == 0 || std::chrono::steady_clock::now() >= *drain_deadline) {
      if (server.in_flight() > 0) server.CancelAll();
      io.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(50));
    drain_timer.async_wait([&](boost::system::error_code) { poll_drain(); });
  };
  stop_signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: draining ({} requests in flight)", sig, server.in_flight());
    (void)NotifyStopping();
    server.BeginDrain();
    *drain_deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(cfg.drain_timeout_seconds);
    poll_drain();
  });
  // A device fault stops the device forward for good (every later step would fail): report it,
  // cancel what runs and exit non-zero, so that systemd (Restart=on-failure) starts afresh
  // instead of a ready daemon that serves only errors.
  int exit_code = 0;
  asio::steady_timer fault_timer(io);
  std::function<void()> watch_fault = [&] {
    fault_timer.expires_after(std::chrono::milliseconds(200));
    fault_timer.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      const Status fault = stepper->fault();
      if (fault.ok()) return watch_fault();
      spdlog::critical("{}", fault.ToString());
      (void)NotifyStatus("failed: " + fault.message());
      exit_code = 1;
      server.CancelAll();
      io.stop();
    });
  };
  if (stepper) watch_fault();
  // SIGHUP: re-read the config file and apply what may change at run time.
  asio::signal_set hup(io, SIGHUP);
  std::function<void()> wait_hup = [&] {
    hup.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      (void)NotifyReloading();
      // Re-read flags and file together so flags keep precedence and removed keys return to
      // their defaults; only reloadable keys may differ.
      auto next = ParseDaemonArgs(argc, argv);
      Status st = next.ok() ? ReloadableConfig(cfg, *next) : next.status();
      if (st.ok()) {
        cfg = *next;
        spdlog::set_level(spdlog::level::from_str(cfg.log_level));
        server.Reload(cfg);
        spdlog::info("configuration reloaded");
      } else {
        spdlog::error("reload refused: {}", st.ToString());
      }
      (void)NotifyReady();
      wait_hup();
    });
  };
  wait_hup();
  // The watchdog is fed only while the engine makes progress or has nothing to do.
  auto interval = WatchdogInterval();
  if (cfg.watchdog && interval.ok() && interval->has_value()) {
    auto last_steps = std::make_shared<uint64_t>(0);
    std::function<void()> feed = [&, last_steps] {
      const uint64_t steps = engine.stats().steps.load();
      const bool idle =
          engine.stats().running.load() == 0 && engine.stats().queue_depth.load() == 0;
      if (idle || steps != *last_steps) (void)NotifyWatchdog();
      *last_steps = steps;
      watchdog_timer.expires_after(**interval / 3);
      watchdog_timer.async_wait([&](boost::system::error_code ec) {
        if (!ec) feed();
      });
    };
    feed();
  }
  (void)NotifyReady();
  (void)NotifyStatus("serving " + info.name);
  spdlog::info("deepinferd ready: model {} (vocab {}), socket {}", info.name, info.vocab_size,
               fd ? std::string("(activated)") : cfg.socket_path);
  io.run();
  // Jobs still queued end (cancelled) on the engine thread; their bookkeeping is posted to the
  // io_context, which runs once more so every session is released before exit.
  engine.Stop();
  io.restart();
  io.poll();
  spdlog::info("deepinferd stopped");
  return exit_code;
}

}  // namespace
}  // namespace deepinfer::daemon

int main(int argc, char** argv) { return deepinfer::daemon::Run(argc, argv); }
