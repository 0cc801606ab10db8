// Request round trip to deepinferd over its Unix socket (a health request: frame encode, daemon
// parse and reply, client decode), next to a plain Unix-socket echo of the same size measured
// in the same run. Starts its own daemon on a tiny model.
//   bench_rpc [--iterations N]
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "engine/model/tiny_checkpoint.h"

using namespace deepinfer;
using Clock = std::chrono::steady_clock;

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1)))];
}

int main(int argc, char** argv) {
  int iterations = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
  }
  // Plain echo: another thread answers each 64-byte message on a Unix socketpair.
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  std::thread echo([fd = sv[1]] {
    char b[64];
    for (;;) {
      if (recv(fd, b, sizeof(b), MSG_WAITALL) != sizeof(b)) break;
      if (send(fd, b, sizeof(b), 0) != sizeof(b)) break;
    }
  });
  std::vector<double> echo_us;
  char msg[64] = {};
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    if (send(sv[0], msg, sizeof(msg), 0) != sizeof(msg) ||
        recv(sv[0], msg, sizeof(msg), MSG_WAITALL) != sizeof(msg)) {
      return 1;
    }
    echo_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  shutdown(sv[0], SHUT_RDWR);
  echo.join();
  close(sv[0]);
  close(sv[1]);

  const auto dir =
      std::filesystem::temp_directory_path() / ("deepinfer-bench-rpc-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  TinySpec spec;
  if (!MakeTinyCheckpoint(spec, (dir / "model").string()).ok()) return 1;
  const std::string sock = (dir / "d.sock").string();
  const std::string daemon = (std::filesystem::path(argv[0]).parent_path() / "deepinferd").string();
  pid_t pid = fork();
  if (pid == 0) {
    execl(daemon.c_str(), "deepinferd", "--model", (dir / "model").c_str(), "--socket",
          sock.c_str(), "--tokenizer", "none", "--threads", "1", "--log-level", "warn", nullptr);
    _exit(127);
  }
  std::unique_ptr<client::Client> c;
  for (int i = 0; i < 200 && !c; ++i) {
    auto r = client::Client::Connect(sock, "bench_rpc");
    if (r.ok())
      c = std::move(r).value();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!c) return 1;
  std::vector<double> rpc_us;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    if (!c->Health().ok()) return 1;
    rpc_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::filesystem::remove_all(dir);
  std::printf(
      "{\"iterations\": %d, \"echo_us_p50\": %.2f, \"echo_us_p99\": %.2f, "
      "\"rpc_us_p50\": %.2f, \"rpc_us_p99\": %.2f, \"rpc_over_echo_p50\": %.2f}\n",
      iterations, Pct(echo_us, 0.5), Pct(echo_us, 0.99), Pct(rpc_us, 0.5), Pct(rpc_us, 0.99),
      Pct(rpc_us, 0.5) / Pct(echo_us, 0.5));
  return 0;
}
