// The daemon test harness: deepinferd on a temporary socket with a tiny model, a client, and
// helpers to send requests and collect their events. Used by daemon_test (protocol, robustness,
// lifecycle) and engine_loop_test (batching, caches, overlap, structured outputs).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "client/client.h"
#include "engine/model/model.h"
#include "tests/unit/test_util.h"

namespace deepinfer::daemon_testing {

using namespace std::chrono_literals;
using testing::TempDir;

inline const std::string kBin = DEEPINFER_BIN_DIR;

class Daemon {
 public:
  Daemon(const std::string& model, const std::string& socket, std::vector<std::string> extra = {})
      : socket_(socket) {
    std::vector<std::string> args = {
        kBin + "/deepinferd", "--model", model,         "--socket", socket, "--tokenizer", "none",
        "--threads",          "1",       "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // up to 20 s for load and warm-up
      if (client::Client::Connect(socket_).ok()) return;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "deepinferd did not come up";
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // SIGTERM; returns the exit status and how long it took.
  std::pair<int, double> Terminate() {
    const auto t0 = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  }
  bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  // Waits up to `seconds` for the daemon to exit by itself: its exit code, or -1 when it is still
  // running (or was killed by a signal).
  int WaitExit(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (std::chrono::steady_clock::now() >= until) return -1;
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

inline ipc::GenerateRequest Request(uint64_t id, std::vector<int32_t> prompt, int64_t max_tokens) {
  ipc::GenerateRequest r;
  r.id = id;
  r.prompt_kind = ipc::PromptKind::kIds;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.temperature = 0;
  return r;
}

struct Ended {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // of the token events
  std::string text;             // of the token and text events
  ipc::TokenEvent end;          // the request's final event (done or error)
};

// Reads events until `count` requests have ended; keyed by request id.
inline std::map<uint64_t, Ended> DrainRequests(client::Client& c, int count) {
  std::map<uint64_t, Ended> out;
  for (int open = count; open > 0;) {
    auto ev = c.NextEvent(60s);
    EXPECT_TRUE(ev.ok() && ev->has_value());
    if (!ev.ok() || !*ev) break;
    const auto& e = **ev;
    Ended& r = out[e.request_id];
    if (e.kind == static_cast<uint16_t>(ipc::EventKind::kToken)) {
      r.tokens.push_back(e.token);
      r.logprobs.push_back(e.logprob);
    }
    if (e.kind == static_cast<uint16_t>(ipc::EventKind::kToken) ||
        e.kind == static_cast<uint16_t>(ipc::EventKind::kText)) {
      r.text.append(e.text, std::min<size_t>(e.text_len, sizeof(e.text)));
    }
    if (e.kind == static_cast<uint16_t>(ipc::EventKind::kDone) ||
        e.kind == static_cast<uint16_t>(ipc::EventKind::kError)) {
      r.end = e;
      --open;
    }
  }
  return out;
}

// The events of the next request to end (use with one request in flight).
inline Ended DrainOne(client::Client& c) {
  for (auto& [id, r] : DrainRequests(c, 1)) {
    if (r.end.kind == static_cast<uint16_t>(ipc::EventKind::kDone) ||
        r.end.kind == static_cast<uint16_t>(ipc::EventKind::kError)) {
      return r;
    }
  }
  return Ended{};
}

// The tokens and the final event of one request.
inline std::pair<std::vector<int32_t>, ipc::TokenEvent> Drain(client::Client& c) {
  Ended e = DrainOne(c);
  return {e.tokens, e.end};
}

// The daemon's status once it contains `want` (its counters follow the events a client has
// already seen), polled for up to 2 s; the last status read if it never does, or the error.
inline Result<std::string> StatusOnceItHas(client::Client& c, const std::string& want) {
  Result<std::string> status = std::string();
  for (int i = 0; i < 100; ++i) {
    status = c.GetStatus();
    if (!status.ok() || status->find(want) != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  return status;
}

inline bool EndedDone(const Ended& r) {
  return r.end.kind == static_cast<uint16_t>(ipc::EventKind::kDone);
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir_ / "model").ok());
    socket_ = dir_ / "d.sock";
  }
  // A random model whose rows cover the test tokenizer's ids (the demo's shape: 129,280 rows,
  // hidden 64), for requests with text and grammars.
  std::string WideModel() {
    TinySpec spec;
    spec.vocab = 129280;
    spec.hidden = 64;
    spec.quantize = "fp8-fp4";
    EXPECT_TRUE(MakeTinyCheckpoint(spec, dir_ / "wide").ok());
    return dir_ / "wide";
  }
  static std::string TestTokenizer() {
    return std::string(DEEPINFER_SOURCE_DIR) + "/deps/tokenizer-v4-test";
  }
  int32_t ReferenceNext(const std::vector<int32_t>& prompt) {
    auto ck = LoadCheckpoint(dir_ / "model");
    auto be = MakeCpuBackend(1);
    Model m(**ck, *be, Numerics::kExact);
    std::vector<float> logits(prompt.size() * 512);
    auto seq = m.NewSequence();
    EXPECT_TRUE(m.Forward(seq, prompt, logits.data(), nullptr).ok());
    const float* last = &logits[(prompt.size() - 1) * 512];
    return static_cast<int32_t>(std::max_element(last, last + 512) - last);
  }
  TempDir dir_;
  std::string socket_;
};

}  // namespace deepinfer::daemon_testing
