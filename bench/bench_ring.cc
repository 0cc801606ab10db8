// Token-event latency across two processes: producer publish -> consumer read.
//
//   bench_ring [--events N] [--warmup W] [--gap-us G] [--pin 0|1]
//
// Three transports, measured in the same run, each with one event in flight: the producer waits
// until the consumer has taken the event, then G microseconds more (default 10, so an eventfd
// consumer is asleep in poll again and every event measures a real wakeup; decode emits a token
// every few milliseconds, so the sleeping path is the one that matters), then stamps the next:
//   ring_spin      SpscRing<TokenEvent> in a memfd ShmRegion, the consumer spinning on TryPop
//   ring_eventfd   the same ring, the producer Signal()s an eventfd after each push and the
//                  consumer sleeps in poll when the ring is empty (the daemon's default path)
//   socket         the peer: a 64-byte message over a Unix stream socketpair, blocking read,
//                  1-byte reply as the acknowledgement (ping-pong)
// In every mode the producer busy-waits (for the acknowledgement and the gap), as the daemon's
// engine thread is busy while the client sleeps. A producer that blocked on the socket reply
// would let the kernel run the consumer on the producer's CPU (Unix sockets wake synchronously),
// which a busy engine thread never allows; that would flatter the socket on a 2-vCPU VM.
// --pin 1 puts the producer on CPU 0 and the consumer on CPU 1 in every mode, so no transport
// can profit from running both ends on one CPU (with --pin 0 the scheduler may do so).
// The producer writes CLOCK_MONOTONIC (steady_clock) into the event just before publishing; the
// consumer (the parent process) reads the clock just after taking it. Prints one JSON line with
// p50/p99/max/mean in nanoseconds per transport and the socket/ring ratios of the medians.
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ipc/eventfd.h"
#include "ipc/shm_region.h"

namespace {

using deepinfer::ipc::EventFd;
using deepinfer::ipc::ShmRegion;
using deepinfer::ipc::TokenEvent;

std::uint64_t NowNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void Die(const std::string& why) {
  std::fprintf(stderr, "bench_ring: %s\n", why.c_str());
  std::exit(1);
}

struct Stats {
  std::uint64_t p50, p99, max;
  double mean;
};

Stats Summarize(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (std::uint64_t x : v) sum += static_cast<double>(x);
  return {v[v.size() / 2], v[v.size() * 99 / 100], v.back(), sum / static_cast<double>(v.size())};
}

std::string Json(const Stats& s) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), R"({"p50_ns":%llu,"p99_ns":%llu,"max_ns":%llu,"mean_ns":%.0f})",
                static_cast<unsigned long long>(s.p50), static_cast<unsigned long long>(s.p99),
                static_cast<unsigned long long>(s.max), s.mean);
  return buf;
}

enum class Mode { kSpin, kEventFd, kSocket };

// Busy-waits with the pause hint; yields its core only after ~50 us of spinning (two vCPUs are
// shared with other work, and a preempted peer should get to run).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <typename Pred>
void SpinUntil(Pred done) {
  for (int i = 0; !done(); ++i) {
    if (i < 20000) {
      CpuRelax();
    } else {
      sched_yield();
    }
  }
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) Die("sched_setaffinity");
}

std::vector<std::uint64_t> Run(Mode mode, std::uint64_t events, std::uint64_t warmup,
                               std::uint64_t gap_ns, bool pin) {
  auto region = ShmRegion::Create(1024, 16);
  if (!region.ok()) Die(region.status().message());
  auto wake = EventFd::Create();
  if (!wake.ok()) Die(wake.status().message());
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
  const std::uint64_t total = events + warmup;

  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {  // producer: the daemon's side of the region
    if (pin) PinTo(0);
    close(sv[1]);
    auto& ring = region->events();
    TokenEvent e{};
    e.kind = 1;
    for (std::uint64_t i = 0; i < total; ++i) {
      const std::uint64_t idle_from = NowNs();
      SpinUntil([&] { return NowNs() - idle_from >= gap_ns; });
      e.request_id = i;
      if (mode == Mode::kSocket) {
        const std::uint64_t t = NowNs();
        std::memcpy(e.text, &t, sizeof(t));
        if (write(sv[0], &e, sizeof(e)) != sizeof(e)) _exit(2);
        char ack;  // busy-wait for the reply, like the ring producer (see the header comment)
        SpinUntil([&] { return recv(sv[0], &ack, 1, MSG_DONTWAIT) == 1; });
        continue;
      }
      const std::uint64_t t = NowNs();
      std::memcpy(e.text, &t, sizeof(t));
      if (!ring.TryPush(e)) _exit(4);  // never full: one event in flight
      if (mode == Mode::kEventFd && !wake->Signal().ok()) _exit(5);
      SpinUntil([&] { return ring.Empty(); });
    }
    _exit(0);
  }
  close(sv[0]);
  if (pin) PinTo(1);
  auto client = ShmRegion::Attach(region->fd());
  if (!client.ok()) Die(client.status().message());
  auto& ring = client->events();
  std::vector<std::uint64_t> lat;
  lat.reserve(events);
  TokenEvent e{};
  for (std::uint64_t i = 0; i < total; ++i) {
    std::uint64_t now = 0;
    if (mode == Mode::kSocket) {
      std::size_t got = 0;
      while (got < sizeof(e)) {
        const ssize_t n = read(sv[1], reinterpret_cast<char*>(&e) + got, sizeof(e) - got);
        if (n <= 0) Die("socket read");
        got += static_cast<std::size_t>(n);
      }
      now = NowNs();
      const char ack = 1;
      if (write(sv[1], &ack, 1) != 1) Die("socket write");
    } else if (mode == Mode::kSpin) {
      SpinUntil([&] { return ring.TryPop(&e); });
      now = NowNs();
    } else {
      while (!ring.TryPop(&e)) {
        auto woke = wake->Wait(std::chrono::milliseconds(-1));
        if (!woke.ok()) Die(woke.status().message());
        wake->Drain();
      }
      now = NowNs();
    }
    if (e.request_id != i) Die("out of order");
    std::uint64_t sent;
    std::memcpy(&sent, e.text, sizeof(sent));
    if (i >= warmup) lat.push_back(now - sent);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("producer failed");
  close(sv[1]);
  return lat;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t events = 1'000'000, warmup = 10'000, gap_us = 10, pin = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--events") {
      events = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--warmup") {
      warmup = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--pin") {
      pin = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--gap-us") {
      gap_us = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      Die("unknown flag " + flag + " (use --events N --warmup W --gap-us G --pin 0|1)");
    }
  }
  if (events == 0) Die("--events must be positive");
  const std::uint64_t gap_ns = gap_us * 1000;
  const Stats spin = Summarize(Run(Mode::kSpin, events, warmup, gap_ns, pin != 0));
  const Stats efd = Summarize(Run(Mode::kEventFd, events, warmup, gap_ns, pin != 0));
  const Stats sock = Summarize(Run(Mode::kSocket, events, warmup, gap_ns, pin != 0));
  auto ratio = [](const Stats& peer, const Stats& s) {
    return static_cast<double>(peer.p50) / static_cast<double>(std::max<std::uint64_t>(s.p50, 1));
  };
  std::printf(
      "{\"bench\":\"ring\",\"events\":%llu,\"gap_us\":%llu,\"pinned\":%s,"
      "\"ring_spin\":%s,\"ring_eventfd\":%s,\"socket\":%s,"
      "\"p50_ratio_socket_over_ring_spin\":%.1f,\"p50_ratio_socket_over_ring_eventfd\":%.2f}\n",
      static_cast<unsigned long long>(events), static_cast<unsigned long long>(gap_us),
      pin ? "true" : "false", Json(spin).c_str(), Json(efd).c_str(), Json(sock).c_str(),
      ratio(sock, spin), ratio(sock, efd));
  return 0;
}
