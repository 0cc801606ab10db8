#include "client/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "client/client.h"

namespace deepinfer::client {

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

struct Samples {
  std::mutex mu;
  std::vector<double> ttft, itl, latency;
  std::atomic<long long> tokens{0}, failures{0};
};

struct InFlight {
  Clock::time_point arrival, last;
  bool first = true;
};

// One connection's share of the load. Arrivals: every request at once in the closed loop (one in
// flight at a time), else exponential gaps at `rate` per second from a fixed seed.
void RunClient(const BenchOptions& o, long long index,
               const std::function<Result<ipc::GenerateRequest>(uint64_t)>& make_request,
               Clock::time_point t0, Samples* s) {
  auto client = Client::Connect(o.socket, "deepinfer-bench");
  if (!client.ok()) {
    s->failures++;
    return;
  }
  std::vector<Clock::time_point> arrivals(static_cast<size_t>(o.requests), t0);
  if (o.rate > 0) {
    std::mt19937_64 rng(static_cast<uint64_t>(index) * 7919 + 1);
    std::exponential_distribution<double> gap(o.rate / static_cast<double>(o.clients));
    double t = 0;
    for (auto& a : arrivals) {
      t += gap(rng);
      a = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
    }
  }
  const long long cap = o.rate > 0 ? o.max_in_flight : 1;
  std::map<uint64_t, InFlight> open;
  std::vector<int32_t> history;  // conversation: every prompt and answer so far
  size_t next = 0;
  while (next < arrivals.size() || !open.empty()) {
    Clock::time_point now = Clock::now();
    while (next < arrivals.size() && arrivals[next] <= now &&
           static_cast<long long>(open.size()) < cap) {
      const uint64_t id = next + 1;
      auto req = make_request(id);
      if (req.ok() && o.turns) {
        // Each client's conversation opens with its own token, so clients share no prefix.
        if (history.empty()) history.push_back(static_cast<int32_t>(index + 1));
        history.insert(history.end(), req->prompt_ids.begin(), req->prompt_ids.end());
        req->prompt_ids = history;
      } else if (req.ok() && o.own_ids > 0) {
        const long long seed = index * 7919 + static_cast<long long>(id) * 104729;
        for (long long k = 0; k < o.own_ids; ++k) {
          req->prompt_ids.push_back(static_cast<int32_t>((seed + k * 37) % 500 + 1));
        }
      }
      if (!req.ok() || !(*client)->Generate(*req).ok()) {
        s->failures++;
        return;
      }
      // Closed loop: the request "arrives" when it can be sent.
      const Clock::time_point arrival = o.rate > 0 ? arrivals[next] : now;
      open[id] = InFlight{arrival, arrival};
      ++next;
      now = Clock::now();
    }
    // Wait for an event, but not past the next arrival that has a free slot.
    auto wait = std::chrono::milliseconds(60000);
    if (next < arrivals.size() && static_cast<long long>(open.size()) < cap) {
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(arrivals[next] - now) +
             std::chrono::milliseconds(1);
      if (open.empty()) {
        std::this_thread::sleep_for(arrivals[next] - now);
        continue;
      }
    }
    auto ev = (*client)->NextEvent(std::max(wait, std::chrono::milliseconds(1)));
    if (!ev.ok()) {
      s->failures++;
      return;
    }
    if (!*ev) continue;
    auto it = open.find((*ev)->request_id);
    if (it == open.end()) continue;
    now = Clock::now();
    const auto kind = static_cast<ipc::EventKind>((*ev)->kind);
    std::lock_guard<std::mutex> lock(s->mu);
    if (kind == ipc::EventKind::kToken) {
      (it->second.first ? s->ttft : s->itl).push_back(Ms(now - it->second.last));
      it->second.first = false;
      it->second.last = now;
      s->tokens++;
      if (o.turns) history.push_back((*ev)->token);
    } else if (kind == ipc::EventKind::kDone || kind == ipc::EventKind::kError) {
      if (kind == ipc::EventKind::kError) s->failures++;
      s->latency.push_back(Ms(now - it->second.arrival));
      open.erase(it);
    }
  }
}

}  // namespace

Result<std::string> RunBench(
    const BenchOptions& o,
    const std::function<Result<ipc::GenerateRequest>(uint64_t)>& make_request) {
  if (o.clients < 1 || o.requests < 1) return InvalidArgument("--clients and --requests >= 1");
  if (!(o.rate >= 0) || !std::isfinite(o.rate)) return InvalidArgument("--rate must be >= 0");
  if (o.turns && o.rate > 0) return InvalidArgument("--turns runs a closed loop: no --rate");
  if (o.own_ids < 0 || (o.own_ids > 0 && o.turns)) {
    return InvalidArgument("--own-ids takes a count >= 0, without --turns");
  }
  Samples s;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (long long c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] { RunClient(o, c, make_request, t0, &s); });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"clients\": %lld, \"requests\": %lld, \"rate\": %.3f, \"failures\": %lld, "
                "\"tokens\": %lld, \"tokens_per_s\": %.1f, \"ttft_ms_p50\": %.3f, "
                "\"ttft_ms_p99\": %.3f, \"itl_ms_p50\": %.3f, \"itl_ms_p99\": %.3f, "
                "\"latency_ms_p50\": %.3f, \"latency_ms_p99\": %.3f}",
                o.clients, o.clients * o.requests, o.rate, s.failures.load(), s.tokens.load(),
                static_cast<double>(s.tokens.load()) / secs, Percentile(s.ttft, 0.5),
                Percentile(s.ttft, 0.99), Percentile(s.itl, 0.5), Percentile(s.itl, 0.99),
                Percentile(s.latency, 0.5), Percentile(s.latency, 0.99));
  if (s.failures > 0)
    return Internal(std::string(buf) + ": " + std::to_string(s.failures) +
                    " requests or clients failed");
  return std::string(buf);
}

}  // namespace deepinfer::client
